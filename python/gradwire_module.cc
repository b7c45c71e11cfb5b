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
#include "python/py_sync.h"
#include "worker/parameter_sync.h"
#include "worker/sync_settings.h"

namespace py = pybind11;

namespace gradwire {
namespace {

// Python names its options as written: "value_type", not "--value-type".
std::string KeywordName(absl::string_view key) { return std::string(key); }

std::unique_ptr<PySync> Connect(const SyncSettings& settings) {
  absl::StatusOr<SyncOptions> options =
      SyncOptionsFromSettings(settings, KeywordName);
  Check(options.status());
  absl::StatusOr<std::unique_ptr<ParameterSync>> sync;
  {
    py::gil_scoped_release release;
    sync = ParameterSync::Connect(*std::move(options));
  }
  Check(sync.status());
  return std::make_unique<PySync>(*std::move(sync));
}

constexpr char kSyncDoc[] = R"doc(
Synchronises a model's parameters with gradwire's parameter-server shards.

The shards run the optimizer: after ``loss.backward()``, ``step()`` takes
the place of ``optimizer.step()``. It compresses every gradient (with error
feedback), pushes it to the shard that owns it, waits for the step the
consistency mode requires, and writes the shards' new weights into the
registered tensors in place. All of it runs in C++ with the GIL released.

Every argument is keyword-only; the defaults are gradwire-worker's.

Topology
  shards (list[str]): shard addresses "host:port", in shard-id order.
  worker_id (int): this worker's id in [0, num_workers).
  num_workers (int): number of workers (nodes) in the job.
  local_rank, local_size (int): ranks of one node average their gradients
      with c10d (Gloo on CPU, NCCL on CUDA) before pushing; local_size 1
      turns that off.
  local_store (str): "host:port" of the node's c10d TCPStore.
Compression
  compressor (str): none, fp16, bf16, topk, randomk, threshold, dgc, qsgd
      or onebit.
  ratio (float): fraction of elements a sparsifier keeps, in (0, 1].
  min_kept (int): elements every chunk keeps at least (sparsifiers), so
      small tensors are not starved at low ratios; 1: exactly ratio.
  threshold (float): |g| a threshold compressor keeps.
  levels (int): qsgd quantisation levels, in [1, 65535].
  qsgd_bucket (int): qsgd elements sharing one norm, a multiple of 64; 0:
      one norm per chunk.
  onebit_bucket (int): onebit elements sharing one scale, a multiple of
      64 (default 512); 0: one scale per chunk.
  value_type (str): precision of pushed values: fp32, fp16 or bf16.
  error_feedback (bool): keep what compression left out for later steps.
  dgc_momentum, dgc_momentum_masking, dgc_clip_norm, dgc_warmup_epochs:
      Deep Gradient Compression's momentum correction, factor masking,
      local clipping and sparsity warm-up.
Shards
  optimizer (str): sgd, momentum, nesterov, adam or adamw.
  lr (float): learning rate, momentum (float): momentum (beta1 for adam),
  weight_decay (float): weight decay.
  momentum_placement (str): where momentum runs: "server", "worker"
      (before compression), "fold" (SGD at fold_scale * lr / (1 -
      momentum); error feedback carries the history) or "auto" (server
      for uncompressed BSP, fold for onebit with error feedback, worker
      otherwise). For adam/adamw: "server", or "worker" (1-bit Adam: the
      first moment on the worker, the second frozen on the shards after
      adam_freeze_step dense steps); "auto" picks worker for compressed
      pushes with error feedback.
  fold_scale (float): with momentum folded, the share of lr / (1 -
      momentum) the shards' SGD takes, in (0, 1] (default 0.4).
  adam_freeze_step (int): 1-bit Adam's dense steps (default 50).
  scale_async_lr (bool): asp/ssp: each push applied at lr / num_workers.
  mode (str): bsp, asp or ssp; staleness (int): the SSP bound.
  pull (str): "delta" (Top-K weight deltas with server-side error
      feedback), "dense" (full weights every step), "exact" (every changed
      element at fp32: lossless, sparse when the shards' update is) or
      "auto" (dense beside compressor "none", delta otherwise).
  pull_ratio (float): fraction of elements a delta pull keeps; 0: the
      push's ratio for topk, randomk and dgc (at least 0.01), 0.05
      otherwise.
  pull_value_type (str): precision of delta pull values: fp32, fp16, bf16.
  partition_bytes (int): largest chunk, in bytes of float32.
  compress_threads (int): threads that compress a push's chunks in
      parallel; 0: one per core this process may run on.
  push_bucket_bytes (int): with gradient hooks (overlap), the gradients
      backward() has finished are pushed once those not yet pushed hold
      this many bytes of float32, and the rest at step(); 0: each as soon
      as the pushing thread is free.
  residual_spare (bool): chunks of 512K floats and more keep a second
      error-feedback residual buffer, so that a gradient's non-finite
      check rides in the pass that adds it (4 more bytes per element of
      those chunks); False: a check pass of its own.
Deadlines and security
  rpc_timeout_seconds (float): deadline of each Init and Push.
  pull_timeout_seconds (float): how long a Pull waits for its step.
  connect_timeout_seconds (float): how long connecting waits for every
      shard to answer.
  tls_cert, tls_key, tls_ca, tls_server_name, auth_token_file (str): TLS,
      mutual TLS and the bearer token of the shard connections (files).
  allow_insecure_token (bool): send auth_token_file's token without TLS
      (no tls_ca); refused otherwise, since it would cross the network in
      clear.

Raises ValueError naming the option for a bad value, gradwire.Error
(message "UNAVAILABLE: ...") when a shard cannot be reached in time.
)doc";

// gradwire.ParameterSync(shards=..., ...): every keyword is a SyncSettings
// field, resolved by SyncOptionsFromSettings like gradwire-worker's flags.
std::unique_ptr<PySync> ConnectWithKeywords(
    std::vector<std::string> shards, int64_t worker_id, int64_t num_workers,
    std::string compressor, double ratio, int64_t min_kept, double threshold,
    int64_t levels, int64_t qsgd_bucket, int64_t onebit_bucket,
    std::string value_type, bool error_feedback, double dgc_momentum,
    bool dgc_momentum_masking, double dgc_clip_norm, int64_t dgc_warmup_epochs,
    std::string optimizer, double lr, double momentum, double weight_decay,
    std::string momentum_placement, double fold_scale, int64_t adam_freeze_step,
    bool scale_async_lr, std::string mode, int64_t staleness, std::string pull,
    double pull_ratio, std::string pull_value_type, int64_t partition_bytes,
    int64_t compress_threads, int64_t push_bucket_bytes, bool residual_spare,
    int64_t local_rank, int64_t local_size, std::string local_store,
    double rpc_timeout_seconds, double pull_timeout_seconds,
    double connect_timeout_seconds, std::string tls_cert, std::string tls_key,
    std::string tls_ca, std::string tls_server_name,
    std::string auth_token_file, bool allow_insecure_token) {
  SyncSettings s;
  s.shards = std::move(shards);
  s.worker_id = worker_id;
  s.num_workers = num_workers;
  s.compressor = std::move(compressor);
  s.ratio = ratio;
  s.min_kept = min_kept;
  s.threshold = threshold;
  s.levels = levels;
  s.qsgd_bucket = qsgd_bucket;
  s.onebit_bucket = onebit_bucket;
  s.value_type = std::move(value_type);
  s.error_feedback = error_feedback;
  s.dgc_momentum = dgc_momentum;
  s.dgc_momentum_masking = dgc_momentum_masking;
  s.dgc_clip_norm = dgc_clip_norm;
  s.dgc_warmup_epochs = dgc_warmup_epochs;
  s.optimizer = std::move(optimizer);
  s.lr = lr;
  s.momentum = momentum;
  s.weight_decay = weight_decay;
  s.momentum_placement = std::move(momentum_placement);
  s.fold_scale = fold_scale;
  s.adam_freeze_step = adam_freeze_step;
  s.scale_async_lr = scale_async_lr;
  s.mode = std::move(mode);
  s.staleness = staleness;
  s.pull = std::move(pull);
  s.pull_ratio = pull_ratio;
  s.pull_value_type = std::move(pull_value_type);
  s.partition_bytes = partition_bytes;
  s.compress_threads = compress_threads;
  s.push_bucket_bytes = push_bucket_bytes;
  s.residual_spare = residual_spare;
  s.local_rank = local_rank;
  s.local_size = local_size;
  s.local_store = std::move(local_store);
  s.rpc_timeout_seconds = rpc_timeout_seconds;
  s.pull_timeout_seconds = pull_timeout_seconds;
  s.connect_timeout_seconds = connect_timeout_seconds;
  s.transport.tls_cert = std::move(tls_cert);
  s.transport.tls_key = std::move(tls_key);
  s.transport.tls_ca = std::move(tls_ca);
  s.transport.tls_server_name = std::move(tls_server_name);
  s.transport.auth_token_file = std::move(auth_token_file);
  s.transport.allow_insecure_token = allow_insecure_token;
  return Connect(s);
}

// The methods and properties of gradwire._C.ParameterSync.
void DefineSyncMethods(py::class_<PySync>& sync) {
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
      .def("_gradient_ready", &PySync::GradientReady, py::arg("index"),
           py::arg("epoch") = 0,
           "Pushes parameter `index`'s gradient now, on a background "
           "thread (overlap; called by the gradient hooks).")
      .def("_await_parameter", &PySync::AwaitParameter, py::arg("index"),
           "Blocks until parameter `index`'s pulled weights have landed "
           "(pull ahead; called by the forward pre-hooks).")
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
      .def("_set_pull_ahead", &PySync::SetPullAhead, py::arg("on"),
           "Turns pull ahead on or off between steps (see pull_ahead).")
      .def("close", &PySync::Close,
           "Waits for queued pushes and drops the shard connections. From "
           "another thread while a call such as step() runs, it first waits "
           "for that call to return; calls made after close() raise "
           "gradwire.Error (FAILED_PRECONDITION).")
      .def_property_readonly(
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
          "Byte counters and phase timings of this worker (SyncStats).");
}

void DefineParameterSync(py::module_& m) {
  const SyncSettings d;
  py::class_<PySync> sync(m, "ParameterSync", kSyncDoc);
  sync.def(py::init(&ConnectWithKeywords), py::kw_only(), py::arg("shards"),
           py::arg("worker_id") = d.worker_id,
           py::arg("num_workers") = d.num_workers,
           py::arg("compressor") = d.compressor, py::arg("ratio") = d.ratio,
           py::arg("min_kept") = d.min_kept, py::arg("threshold") = d.threshold,
           py::arg("levels") = d.levels, py::arg("qsgd_bucket") = d.qsgd_bucket,
           py::arg("onebit_bucket") = d.onebit_bucket,
           py::arg("value_type") = d.value_type,
           py::arg("error_feedback") = d.error_feedback,
           py::arg("dgc_momentum") = d.dgc_momentum,
           py::arg("dgc_momentum_masking") = d.dgc_momentum_masking,
           py::arg("dgc_clip_norm") = d.dgc_clip_norm,
           py::arg("dgc_warmup_epochs") = d.dgc_warmup_epochs,
           py::arg("optimizer") = d.optimizer, py::arg("lr") = d.lr,
           py::arg("momentum") = d.momentum,
           py::arg("weight_decay") = d.weight_decay,
           py::arg("momentum_placement") = d.momentum_placement,
           py::arg("fold_scale") = d.fold_scale,
           py::arg("adam_freeze_step") = d.adam_freeze_step,
           py::arg("scale_async_lr") = d.scale_async_lr,
           py::arg("mode") = d.mode, py::arg("staleness") = d.staleness,
           py::arg("pull") = d.pull, py::arg("pull_ratio") = d.pull_ratio,
           py::arg("pull_value_type") = d.pull_value_type,
           py::arg("partition_bytes") = d.partition_bytes,
           py::arg("compress_threads") = d.compress_threads,
           py::arg("push_bucket_bytes") = d.push_bucket_bytes,
           py::arg("residual_spare") = d.residual_spare,
           py::arg("local_rank") = d.local_rank,
           py::arg("local_size") = d.local_size,
           py::arg("local_store") = d.local_store,
           py::arg("rpc_timeout_seconds") = d.rpc_timeout_seconds,
           py::arg("pull_timeout_seconds") = d.pull_timeout_seconds,
           py::arg("connect_timeout_seconds") = d.connect_timeout_seconds,
           py::arg("tls_cert") = "", py::arg("tls_key") = "",
           py::arg("tls_ca") = "", py::arg("tls_server_name") = "",
           py::arg("auth_token_file") = "",
           py::arg("allow_insecure_token") = false);
  DefineSyncMethods(sync);
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
  DefineParameterSync(m);
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
