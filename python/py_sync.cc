#include "python/py_sync.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <utility>

#include "worker/sync_settings.h"

namespace py = pybind11;

namespace gradwire {
namespace {

PyObject* g_error = nullptr;

}  // namespace

void SetErrorType(PyObject* error) { g_error = error; }

ParameterSync::NamedTensors ReadNamedTensors(const py::handle& parameters) {
  py::iterable items = py::hasattr(parameters, "items")
                           ? parameters.attr("items")().cast<py::iterable>()
                           : py::reinterpret_borrow<py::iterable>(parameters);
  ParameterSync::NamedTensors named;
  for (py::handle item : items) {
    py::tuple pair;
    try {
      pair = item.cast<py::tuple>();
    } catch (const py::cast_error&) {
      throw py::value_error(
          "parameters: expected (name, tensor) pairs, as named_parameters() "
          "gives");
    }
    if (pair.size() != 2 || !THPVariable_Check(pair[1].ptr())) {
      throw py::value_error(
          "parameters: expected (name, tensor) pairs, as named_parameters() "
          "gives");
    }
    named.emplace_back(pair[0].cast<std::string>(),
                       pair[1].cast<torch::Tensor>());
  }
  return named;
}

void SetPythonError(const absl::Status& status) {
  if (absl::IsInvalidArgument(status)) {
    PyErr_SetString(PyExc_ValueError, std::string(status.message()).c_str());
    return;
  }
  PyErr_SetString(g_error, status.ToString().c_str());
}

void Raise(const absl::Status& status) {
  SetPythonError(status);
  throw py::error_already_set();
}

class PySync::Use {
 public:
  // Takes mu_ only briefly, and Close() never asks for the GIL while
  // holding it: with or without the GIL.
  explicit Use(PySync* owner) : owner_(owner) {
    absl::MutexLock lock(&owner_->mu_);
    if (owner_->closing_ || owner_->sync_ == nullptr) {
      sync_ = nullptr;
      return;
    }
    sync_ = owner_->sync_.get();
    ++owner_->in_use_;
  }
  ~Use() {
    if (sync_ == nullptr) return;
    absl::MutexLock lock(&owner_->mu_);
    --owner_->in_use_;
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

  // Null once close() has begun.
  ParameterSync* sync() { return sync_; }

  // Raises FAILED_PRECONDITION once close() has begun. Needs the GIL.
  ParameterSync& get() {
    if (sync_ == nullptr) Raise(Closed());
    return *sync_;
  }

  static absl::Status Closed() {
    return absl::FailedPreconditionError("ParameterSync is closed");
  }

 private:
  PySync* owner_;
  ParameterSync* sync_;
};

PySync::PySync(std::unique_ptr<ParameterSync> sync) : sync_(std::move(sync)) {}

// Python holds a reference to the object during every call: none runs here.
PySync::~PySync() = default;

template <typename Call>
void PySync::Released(Call call) {
  Use use(this);
  ParameterSync& sync = use.get();
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = call(sync);
  }
  Check(status);
}

void PySync::Register(const ParameterSync::NamedTensors& named,
                      std::vector<bool> uncompressed) {
  Released([&](ParameterSync& sync) {
    return sync.Register(named, std::move(uncompressed));
  });
  tensors_.Record(named);
}

void PySync::Step(int epoch) {
  Check(tensors_.CheckAll());
  Released([&](ParameterSync& sync) { return sync.Step(epoch); });
}

void PySync::StepCarrying(int epoch, const std::vector<uint32_t>& carried) {
  Check(tensors_.CheckAll());
  Released(
      [&](ParameterSync& sync) { return sync.StepCarrying(epoch, carried); });
}

template <typename Call>
absl::Status PySync::Run(Call call) {
  Use use(this);
  if (use.sync() == nullptr) return Use::Closed();
  return call(*use.sync());
}

absl::Status PySync::AnnounceGradient(size_t index, int epoch) {
  if (absl::Status s = tensors_.Check(index); !s.ok()) return s;
  return Run(
      [&](ParameterSync& sync) { return sync.GradientReady(index, epoch); });
}

absl::Status PySync::AwaitParameter(size_t index) {
  if (absl::Status s = tensors_.Check(index); !s.ok()) return s;
  return Run([&](ParameterSync& sync) { return sync.AwaitParameter(index); });
}

void PySync::AwaitWeights() {
  Check(tensors_.CheckAll());
  Released([](ParameterSync& sync) { return sync.AwaitWeights(); });
}

std::string PySync::SaveState() {
  absl::StatusOr<std::string> state;
  Released([&](ParameterSync& sync) {
    state = sync.SaveState();
    return state.status();
  });
  return *std::move(state);
}

void PySync::LoadState(const std::string& state) {
  Released([&](ParameterSync& sync) { return sync.LoadState(state); });
}

void PySync::SetPullAhead(bool on) {
  Released([&](ParameterSync& sync) { return sync.SetPullAhead(on); });
}

void PySync::SetKeepWeightsInGradients(bool on) {
  Released(
      [&](ParameterSync& sync) { return sync.SetKeepWeightsInGradients(on); });
}

void PySync::SetKeepResiduals(bool on) {
  Released([&](ParameterSync& sync) { return sync.SetKeepResiduals(on); });
}

int PySync::RestoreResiduals() {
  int missing = 0;
  Released([&](ParameterSync& sync) {
    absl::StatusOr<int> restored = sync.RestoreResiduals();
    if (restored.ok()) missing = *restored;
    return restored.status();
  });
  return missing;
}

void PySync::Close() {
  std::unique_ptr<ParameterSync> closing;
  {
    // Without the GIL: a running call may need it to return (its Use
    // destructor runs after it takes the GIL back).
    py::gil_scoped_release release;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      mu_.Await(absl::Condition(
          +[](int* in_use) { return *in_use == 0; }, &in_use_));
      closing = std::move(sync_);
    }
    // Waits for queued pushes: still without the GIL.
    closing.reset();
  }
}

int64_t PySync::NextStep() {
  Use use(this);
  return use.get().step();
}

std::string PySync::OptimizerPlacement() {
  Use use(this);
  return DescribeOptimizerPlacement(use.get().options());
}

SyncStats PySync::Stats() {
  Use use(this);
  return use.get().stats();
}

WireTotals PySync::WireBytes() {
  Use use(this);
  return use.get().WireBytes();
}

double PySync::ResidualNorm() {
  Use use(this);
  return use.get().ResidualNorm();
}

std::vector<std::pair<std::string, double>> PySync::AutoChosenRatios() {
  Use use(this);
  std::vector<std::pair<std::string, double>> ratios;
  const AutoCompressionReport* report = use.get().auto_compression();
  if (report == nullptr || report->history.empty()) return ratios;
  const std::vector<double>& last = report->history.back().ratios;
  for (size_t i = 0; i < report->groups.size() && i < last.size(); ++i) {
    ratios.emplace_back(report->groups[i], last[i]);
  }
  return ratios;
}

}  // namespace gradwire
