// gradwire._C: the Python face of the C++ worker library. Everything that
// costs time (compression, encoding, RPCs, writing weights back) runs in
// the C++ code below with the GIL released; tensors cross without copies
// through torch's own pybind11 casters, so a registered parameter is the
// very tensor the C++ side reads and writes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/heap_tuning.h"
#include "common/lock_checks.h"
#include "python/py_metrics.h"
#include "python/py_overlap.h"
#include "python/py_settings.h"
#include "python/py_sync.h"
#include "worker/parameter_sync.h"
#include "worker/sync_settings.h"

namespace py = pybind11;

namespace gradwire {
namespace {

// Python names its options as written: "value_type", not "--value-type".
std::string KeywordName(absl::string_view key) { return std::string(key); }

std::shared_ptr<PySync> Connect(const SyncSettings& settings) {
  absl::StatusOr<SyncOptions> options =
      SyncOptionsFromSettings(settings, KeywordName);
  Check(options.status());
  // Recorded where the process serves /metrics (py_metrics.h).
  options->metrics_registry = ServedRegistry();
  absl::StatusOr<std::unique_ptr<ParameterSync>> sync;
  {
    py::gil_scoped_release release;
    sync = ParameterSync::Connect(*std::move(options));
  }
  Check(sync.status());
  return std::make_shared<PySync>(*std::move(sync));
}

constexpr char kSyncDoc[] = R"doc(
Synchronises a model's parameters with gradwire's parameter-server shards.

The shards run the optimizer: after ``loss.backward()``, ``step()`` takes
the place of ``optimizer.step()``. It compresses every gradient (with error
feedback), pushes it to the shard that owns it, waits for the step the
consistency mode requires, and writes the shards' new weights into the
registered tensors in place. All of it runs in C++ with the GIL released.

Every argument is keyword-only; the defaults are gradwire-worker's, and
the settings below are those of docs/reference/settings.md
(gradwire.settings() lists them).

)doc";

constexpr char kSyncDocEnd[] = R"doc(
Raises TypeError for an unknown keyword (naming the nearest known one) or
a value of another type, ValueError naming the option for a bad value,
gradwire.Error (message "UNAVAILABLE: ...") when a shard cannot be reached
in time.
)doc";

// gradwire.ParameterSync(shards=..., ...): every keyword is a setting of
// the table (py_settings.h), resolved by SyncOptionsFromSettings like
// gradwire-worker's flags.
std::shared_ptr<PySync> ConnectWithKeywords(const py::kwargs& keywords) {
  return Connect(SettingsFromKeywords(keywords));
}

// gradwire._C.ParameterSync is held by std::shared_ptr: the gradient hooks
// and the layer gate (py_overlap.h) hold it too.
using SyncClass = py::class_<PySync, std::shared_ptr<PySync>>;

// The switches DistributedOptimizer and ParameterSync turn between steps.
void DefineSyncSwitches(SyncClass& sync) {
  sync.def("_set_pull_ahead", &PySync::SetPullAhead, py::arg("on"),
           "Turns pull ahead on or off between steps (see pull_ahead).")
      .def("_set_keep_weights_in_gradients", &PySync::SetKeepWeightsInGradients,
           py::arg("on"),
           "After each step's pushes, copies every registered tensor into "
           "its gradient before the pulls move it "
           "(ParameterSync::SetKeepWeightsInGradients).")
      .def("_set_keep_residuals", &PySync::SetKeepResiduals, py::arg("on"),
           "From the next step on, keeps a copy of each residual before "
           "the step for _restore_residuals "
           "(ParameterSync::SetKeepResiduals).")
      .def("_restore_residuals", &PySync::RestoreResiduals,
           "Puts the residuals back as they were before the last step; "
           "returns how many chunks had no copy "
           "(ParameterSync::RestoreResiduals).");
}

// The methods and properties of gradwire._C.ParameterSync.
void DefineSyncMethods(SyncClass& sync) {
  sync.def(
          "_register",
          [](PySync& s, const py::handle& parameters,
             std::vector<bool> uncompressed) {
            s.Register(ReadNamedTensors(parameters), std::move(uncompressed));
          },
          py::arg("parameters"), py::arg("uncompressed") = std::vector<bool>(),
          "Declares the parameters and Inits the shards (see register).")
      .def("step", &PySync::Step, py::arg("epoch") = 0,
           R"doc(One step: pushes the compressed gradients (those not pushed
during backward() by overlap), waits for the consistency mode's step, and
writes the shards' new weights into the registered tensors. ``epoch`` feeds
compressor warm-up schedules. Raises gradwire.Error when a shard fails or
the deadline passes; the step can be retried.)doc")
      .def("_step_carrying", &PySync::StepCarrying, py::arg("epoch"),
           py::arg("carried"),
           "step() in which only the registered tensors at the indices "
           "`carried` push their gradients; the others push nothing and "
           "are not reduced inside the node "
           "(ParameterSync::StepCarrying).")
      .def("await_weights", &PySync::AwaitWeights,
           R"doc(Blocks until the weights of the last step's pulls have all
landed (with pull ahead, step() returns before they do). Call it before
reading the parameters outside the model's forward pass: saving a
checkpoint, copying weights. Raises gradwire.Error when a pull failed.)doc")
      .def(
          "_save_state", [](PySync& s) { return py::bytes(s.SaveState()); },
          "This worker's compression state (residuals, velocities, step) "
          "as bytes (worker/worker_state.h).")
      .def("_load_state", &PySync::LoadState, py::arg("state"),
           "Restores what _save_state returned; ValueError for another "
           "job's or worker's state, gradwire.Error for another step.")
      .def("close", &PySync::Close,
           "Waits for queued pushes and drops the shard connections. From "
           "another thread while a call such as step() runs, it first waits "
           "for that call to return; calls made after close() raise "
           "gradwire.Error (FAILED_PRECONDITION).");
}

// What gradwire._C.ParameterSync tells about itself: its step, placement,
// byte counters and compression state.
void DefineSyncReadouts(SyncClass& sync) {
  sync.def_property_readonly(
          "next_step", [](PySync& s) { return s.NextStep(); },
          "The next step number (steps pushed so far, resumed ones "
          "included).")
      .def_property_readonly(
          "optimizer_placement",
          [](PySync& s) { return s.OptimizerPlacement(); },
          "What runs where: the line gradwire-worker logs at start and puts "
          "in its summary as \"optimizer\".")
      .def_property_readonly(
          "stats", [](PySync& s) { return s.Stats(); },
          "Byte counters and phase timings of this worker (SyncStats).")
      .def_property_readonly(
          "wire_bytes",
          [](PySync& s) -> py::object {
            const WireTotals wire = s.WireBytes();
            if (!wire.known) return py::none();
            py::dict d;
            d["sent"] = wire.sent;
            d["received"] = wire.received;
            return d;
          },
          "The TCP bytes of this worker's connections to the shards as the "
          "kernel counts them (payload plus HTTP/2, gRPC and TLS framing), "
          "{'sent': ..., 'received': ...}; None where the transport cannot "
          "count them (Unix sockets).")
      .def("residual_norm", &PySync::ResidualNorm,
           py::call_guard<py::gil_scoped_release>(),
           "The L2 norm of this worker's error-feedback residuals now (a "
           "pass over them; call it between steps).")
      .def(
          "auto_ratios",
          [](PySync& s) {
            py::dict ratios;
            for (const auto& [group, ratio] : s.AutoChosenRatios()) {
              ratios[py::str(group)] = ratio;
            }
            return ratios;
          },
          "Compressor auto's last choice, {registered tensor: ratio} (1: "
          "dense); empty for another compressor or before its first "
          "choice.");
}

void DefineParameterSync(py::module_& m) {
  // pybind11 keeps the pointer: the text lives as long as the module.
  static const std::string* const doc = new std::string(
      absl::StrCat(kSyncDoc, KeywordSettingsDoc(), kSyncDocEnd));
  SyncClass sync(m, "ParameterSync", doc->c_str());
  sync.def(py::init(&ConnectWithKeywords));
  DefineSyncMethods(sync);
  DefineSyncReadouts(sync);
  DefineSyncSwitches(sync);
}

void DefineStats(py::module_& m) {
  py::class_<SyncStats>(m, "SyncStats",
                        "Byte counters (serialized message sizes) and "
                        "seconds per phase, summed over steps.")
      .def_readonly("steps", &SyncStats::steps)
      .def_readonly("pushed_bytes", &SyncStats::pushed_bytes)
      .def_readonly("pulled_bytes", &SyncStats::pulled_bytes)
      .def_readonly("dense_equivalent_bytes",
                    &SyncStats::dense_equivalent_bytes,
                    "What fp32 dense pushes of the same gradients cost.")
      .def_readonly("init_bytes", &SyncStats::init_bytes)
      .def_readonly("startup_bytes_sent", &SyncStats::startup_bytes_sent,
                    "What register() sent before step 0 (Init and pulls).")
      .def_readonly("startup_bytes_received",
                    &SyncStats::startup_bytes_received)
      .def_readonly("startup_seconds", &SyncStats::startup_seconds,
                    "register()'s seconds, from its start to the weights "
                    "in place.")
      .def_readonly("retries", &SyncStats::retries)
      .def_readonly("max_step_lead", &SyncStats::max_step_lead)
      .def_readonly("reduce_seconds", &SyncStats::reduce_seconds)
      .def_readonly("compress_seconds", &SyncStats::compress_seconds)
      .def_readonly("push_seconds", &SyncStats::push_seconds)
      .def_readonly("pull_seconds", &SyncStats::pull_seconds)
      .def_readonly("pull_wait_seconds", &SyncStats::pull_wait_seconds,
                    "What of pull_seconds the training thread waited for.")
      .def("as_dict",
           [](const SyncStats& s) {
             py::dict d;
             d["steps"] = s.steps;
             d["pushed_bytes"] = s.pushed_bytes;
             d["pulled_bytes"] = s.pulled_bytes;
             d["dense_equivalent_bytes"] = s.dense_equivalent_bytes;
             d["init_bytes"] = s.init_bytes;
             d["startup_bytes_sent"] = s.startup_bytes_sent;
             d["startup_bytes_received"] = s.startup_bytes_received;
             d["startup_seconds"] = s.startup_seconds;
             d["retries"] = s.retries;
             d["max_step_lead"] = s.max_step_lead;
             d["reduce_seconds"] = s.reduce_seconds;
             d["compress_seconds"] = s.compress_seconds;
             d["push_seconds"] = s.push_seconds;
             d["pull_seconds"] = s.pull_seconds;
             d["pull_wait_seconds"] = s.pull_wait_seconds;
             return d;
           })
      .def("__repr__", [](const SyncStats& s) {
        return absl::StrCat(
            "SyncStats(steps=", s.steps, ", pushed_bytes=", s.pushed_bytes,
            ", pulled_bytes=", s.pulled_bytes,
            ", dense_equivalent_bytes=", s.dense_equivalent_bytes, ")");
      });
}

}  // namespace
}  // namespace gradwire

PYBIND11_MODULE(_C, m) {
  using namespace gradwire;
  m.doc() = "gradwire's C++ engine (compression, codec, gRPC client).";
  DisableMutexDeadlockDetection();
  // torch must be imported first: its module registers the Tensor type
  // that the casters convert to and from.
  py::module_::import("torch");
  PyObject* g_error = PyErr_NewExceptionWithDoc(
      "gradwire.Error",
      "A gradwire operation failed; the message starts with the status "
      "code (UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION, ...).",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::handle(g_error);
  SetErrorType(g_error);
  DefineStats(m);
  DefineMetrics(m);
  DefineParameterSync(m);
  DefineOverlap(m);
  m.def("settings", &SettingsAsPython,
        "Every worker setting of the table (docs/reference/settings.md): "
        "a list of dicts with name, type, default, group, help, choices, "
        "min, max, min_open, max_open, conditional, flag, keyword and "
        "environment.");
  m.def(
      "tune_heap",
      [] {
        const HeapTuning tuning = TuneHeapForTraining();
        return py::make_tuple(tuning.applied, tuning.description);
      },
      "Keeps a training step's large buffers in the heap between steps "
      "(glibc's malloc thresholds, as gradwire-worker --tune-heap does); "
      "settings in GLIBC_TUNABLES or MALLOC_*_THRESHOLD_ win. Returns "
      "(applied, description). Affects the whole process.");
  m.attr("__version__") = GRADWIRE_VERSION;
}
