#include "python/py_overlap.h"

#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "worker/gradient_hooks.h"
#include "worker/layer_gate.h"

namespace py = pybind11;

namespace gradwire {
namespace {

// Raises `error` out of backward(): the autograd engine carries a
// python_error from the thread that ran the hook to the one that called
// backward(), which restores it as the Python exception.
[[noreturn]] void ThrowFromHook(const absl::Status& error) {
  python_error raised;
  {
    py::gil_scoped_acquire gil;
    SetPythonError(error);
    raised.persist();
  }
  throw raised;
}

std::unique_ptr<GradientHooks> MakeHooks(
    std::shared_ptr<PySync> sync, const py::handle& parameters,
    int backward_passes_per_step, std::vector<torch::Tensor> gradient_targets) {
  std::vector<torch::Tensor> tensors;
  std::vector<std::string> names;
  for (auto& [name, tensor] : ReadNamedTensors(parameters)) {
    names.push_back(std::move(name));
    tensors.push_back(std::move(tensor));
  }
  GradientHooks::Options options;
  options.names = std::move(names);
  options.backward_passes_per_step = backward_passes_per_step;
  options.gradient_targets = std::move(gradient_targets);
  options.announce = [sync](size_t index, int epoch) {
    return sync->AnnounceGradient(index, epoch);
  };
  options.report = [](absl::Status error) { ThrowFromHook(error); };
  absl::StatusOr<std::unique_ptr<GradientHooks>> hooks =
      GradientHooks::Create(tensors, std::move(options));
  Check(hooks.status());
  return *std::move(hooks);
}

constexpr char kHooksDoc[] = R"doc(
Pushes each parameter's gradient as soon as backward() has finished it: a
C++ hook on the parameter's AccumulateGrad node announces it to the
ParameterSync (worker/gradient_hooks.h), on autograd's thread, without the
GIL. With backward_passes_per_step > 1 the gradient is announced after the
step's last pass. An error in a hook leaves backward(): ValueError for a
registered tensor that changed layout, gradwire.Error otherwise (a pass too
many, a refused push).

Args: sync (the gradwire.ParameterSync the tensors are registered with),
parameters ((name, tensor) pairs to hook, as register() takes them, in
registration order), backward_passes_per_step (>= 1),
gradient_targets (empty, or one registered tensor per parameter that gets
the parameter's gradient before it is announced). ValueError naming the
argument for a bad one.
)doc";

void DefineGradientHooks(py::module_& m) {
  py::class_<GradientHooks>(m, "GradientHooks", kHooksDoc)
      .def(py::init(&MakeHooks), py::arg("sync"), py::arg("parameters"),
           py::arg("backward_passes_per_step") = 1,
           py::arg("gradient_targets") = std::vector<torch::Tensor>())
      .def("set_epoch", &GradientHooks::set_epoch, py::arg("epoch"),
           "The epoch announced gradients are compressed for (DGC).")
      .def(
          "finish_step",
          [](GradientHooks& hooks) { Check(hooks.FinishStep()); },
          "Ends the step's backward passes (call before its step): raises "
          "gradwire.Error when a pushed gradient changed since; the next "
          "backward pass counts for the next step either way.")
      .def("remove", &GradientHooks::Remove,
           "Takes the hooks off; nothing is pushed during backward() after "
           "this. Removing twice is harmless.");
}

std::unique_ptr<LayerGate> MakeGate(
    std::shared_ptr<PySync> sync,
    const std::vector<torch::Tensor>& parameters) {
  return std::make_unique<LayerGate>(
      parameters, [sync](size_t index) { return sync->AwaitParameter(index); });
}

constexpr char kGateDoc[] = R"doc(
Lets each layer of a forward pass wait for its own pulled weights (pull
ahead, worker/layer_gate.h). Args: sync (the gradwire.ParameterSync),
parameters (the registered tensors, registration order). The package calls
before_layer from a forward pre-hook of each module holding registered
parameters.
)doc";

void DefineLayerGate(py::module_& m) {
  py::class_<LayerGate>(m, "LayerGate", kGateDoc)
      .def(py::init(&MakeGate), py::arg("sync"), py::arg("parameters"))
      .def(
          "holds",
          [](const LayerGate& gate,
             const std::vector<torch::Tensor>& layer_parameters) {
            return !gate.IndicesOf(layer_parameters).empty();
          },
          py::arg("layer_parameters"),
          "Whether any of `layer_parameters` is registered.")
      .def(
          "before_layer",
          [](LayerGate& gate,
             const std::vector<torch::Tensor>& layer_parameters) {
            absl::Status landed;
            {
              py::gil_scoped_release release;
              landed = gate.BeforeParameters(layer_parameters);
            }
            Check(landed);
          },
          py::arg("layer_parameters"),
          "Blocks, without the GIL, until every registered tensor of "
          "`layer_parameters` holds its pulled weights; raises gradwire.Error "
          "when a pull failed.");
}

}  // namespace

void DefineOverlap(py::module_& m) {
  DefineGradientHooks(m);
  DefineLayerGate(m);
}

}  // namespace gradwire
