// gradwire._C.ParameterSync's C++ object: owns the ParameterSync, checks
// the registered tensors before each call (registered_tensors.h), and lets
// close() run from any thread.
//
// Every call runs the ParameterSync without the GIL, so another Python
// thread may call close() while a step() is running. close() marks the
// object closed, so that calls starting later raise FAILED_PRECONDITION
// ("ParameterSync is closed"), then waits, with the GIL released, for the
// calls already running to return before it destroys the ParameterSync:
// it never frees the object a running call uses. A running call ends within
// its own deadlines (rpc_timeout_seconds, pull_timeout_seconds), so close()
// waits at most that long.
//
// Thread safety: every method may be called from any Python thread with
// the GIL held, except AnnounceGradient and AwaitParameter, which run
// without it (see there).
#ifndef GRADWIRE_PYTHON_PY_SYNC_H_
#define GRADWIRE_PYTHON_PY_SYNC_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "python/registered_tensors.h"
#include "worker/parameter_sync.h"

namespace gradwire {

// Sets gradwire.Error, the exception type of every failure that is not a
// bad argument (called once by the module's initialisation).
void SetErrorType(PyObject* error);

// Sets the Python error for a failed status: ValueError for
// INVALID_ARGUMENT (a bad option or tensor), gradwire.Error otherwise
// ("UNAVAILABLE: ..."). Needs the GIL.
void SetPythonError(const absl::Status& status);
// Raises that error as pybind11::error_already_set. Needs the GIL.
[[noreturn]] void Raise(const absl::Status& status);
inline void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

// Reads (name, tensor) pairs from named_parameters(), a dict or a list of
// pairs. Raises ValueError for anything else. Needs the GIL.
ParameterSync::NamedTensors ReadNamedTensors(
    const pybind11::handle& parameters);

class PySync {
 public:
  explicit PySync(std::unique_ptr<ParameterSync> sync);
  ~PySync();

  // Registers `named` (ReadNamedTensors) and records their layout.
  void Register(const ParameterSync::NamedTensors& named,
                std::vector<bool> uncompressed);
  // Each raises ValueError when a registered tensor it reads or writes
  // changed layout since register(), before touching any of them.
  void Step(int epoch);
  // ParameterSync::StepCarrying.
  void StepCarrying(int epoch, const std::vector<uint32_t>& carried);
  void AwaitWeights();
  std::string SaveState();
  void LoadState(const std::string& state);
  void SetPullAhead(bool on);
  void SetKeepWeightsInGradients(bool on);
  void SetKeepResiduals(bool on);
  // ParameterSync::RestoreResiduals(): the chunks it could not restore.
  int RestoreResiduals();
  // Waits for the running calls (see above), then drops the sync. Closing
  // twice is harmless.
  void Close();

  // Read-only accessors (next_step, optimizer_placement, stats).
  int64_t NextStep();
  std::string OptimizerPlacement();
  SyncStats Stats();
  // ParameterSync::WireBytes(): the kernel's TCP byte counts.
  WireTotals WireBytes();
  // ParameterSync::ResidualNorm(): a pass over the residuals.
  double ResidualNorm();
  // Compressor "auto"'s last choice: (group, ratio) per registered tensor,
  // in order (RungRatio: 1 is dense); empty for another compressor or
  // before its first choice.
  std::vector<std::pair<std::string, double>> AutoChosenRatios();

  size_t registered() const { return tensors_.size(); }

  // For the gradient hooks and the layer gate (py_overlap.h): the sync's
  // GradientReady and AwaitParameter after the layout check of parameter
  // `index`, returning the error instead of raising it (FAILED_PRECONDITION
  // once closed). They neither need nor take the GIL: the hooks run on
  // autograd's threads, the gate with the GIL released. The layout check
  // reads tensor metadata without the GIL: registered tensors must not be
  // replaced from another Python thread during backward() or forward().
  absl::Status AnnounceGradient(size_t index, int epoch);
  absl::Status AwaitParameter(size_t index);

 private:
  // Holds the sync open for one call: close() waits until no Use is alive.
  class Use;

  // Runs `call` on the sync on the calling thread, GIL or not;
  // FAILED_PRECONDITION once closed.
  template <typename Call>
  absl::Status Run(Call call);

  // Runs `call` on the sync without the GIL (it may block on the network,
  // and the pull thread's hooks need none) and raises its error.
  template <typename Call>
  void Released(Call call);

  absl::Mutex mu_;
  // Null once closed.
  std::unique_ptr<ParameterSync> sync_ ABSL_GUARDED_BY(mu_);
  // close() has begun: no call may start.
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // Calls running on sync_.
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;

  // Read and written with the GIL held.
  RegisteredTensors tensors_;
};

}  // namespace gradwire

#endif  // GRADWIRE_PYTHON_PY_SYNC_H_
