// The ranks of one worker node (one process per local rank) as a
// communication group: gradients are averaged inside the node before they are
// compressed and pushed, and the weights that one local rank pulled are
// broadcast to the others, so the shards see one worker per node.
//
//   LocalGroupOptions options;
//   options.rank = local_rank;  options.size = local_size;
//   auto group = LocalGroup::Create(options);       // StatusOr; rendezvous
//   (*group)->AllReduceMean(gradients);             // in place
//   (*group)->Broadcast(weights, /*root=*/owner);    // in place
//
// Rendezvous goes through a c10d TCPStore that local rank 0 hosts on
// store_host:store_port; the other ranks connect to it. The collectives run
// on the backend that fits the tensors' device: c10d Gloo for CPU tensors
// (over loopback: the group never leaves the host), c10d NCCL for CUDA tensors
// when the linked libtorch was built with it (USE_C10D_NCCL), otherwise CUDA
// tensors get UNIMPLEMENTED.
//
// Errors: libtorch's exceptions never leave this class; every method returns
// a status. DEADLINE_EXCEEDED: a peer did not answer within the timeout;
// UNAVAILABLE: a peer or the store went away; INVALID_ARGUMENT: bad input
// (checked locally, before anything is sent, so the group stays usable).
// After a collective has failed the ranks no longer agree on what was sent,
// so the group is broken: every later call returns FAILED_PRECONDITION with
// the first error, and the tensors of the failed call hold unspecified
// values. Create a new group (all ranks) to recover.
//
// Thread safety: rank() and size() are thread-safe. The collectives are not:
// call them from one thread at a time, and in the same order, with tensors of
// the same shapes and dtypes, on every rank (c10d pairs collectives by their
// order; a mismatch times out or corrupts data).
#ifndef GRADWIRE_WORKER_LOCAL_GROUP_H_
#define GRADWIRE_WORKER_LOCAL_GROUP_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gradwire {

struct LocalGroupOptions {
  // This process's rank in [0, size), and the number of processes on the
  // host. size 1 makes a group that does nothing (no store, no sockets).
  int rank = 0;
  int size = 1;
  // Where rank 0 hosts the rendezvous store (it binds store_port; the others
  // connect to store_host:store_port).
  std::string store_host = "127.0.0.1";
  int store_port = 29501;
  // Bound on every blocking step: waiting for the other ranks at Create, and
  // each collective.
  absl::Duration timeout = absl::Seconds(60);
};

class LocalGroup {
 public:
  // Validates the options and, when size > 1, meets the other ranks: rank 0
  // starts the store, every rank connects to it, announces itself and waits
  // until all size ranks have; then they connect the Gloo group (NCCL is
  // connected on the first CUDA call). The ranks must all call Create within
  // options.timeout of each other; a call blocks for about that long at most.
  // With size > 1, SIGPIPE is set to be ignored when it is at its default
  // action, so that a peer that died fails the next collective instead of
  // ending this process. INVALID_ARGUMENT for bad options; DEADLINE_EXCEEDED
  // when a rank does not show up in time (naming the missing ranks, or the
  // store that could not be reached); UNAVAILABLE when the store port
  // cannot be bound or a peer fails during the rendezvous.
  static absl::StatusOr<std::unique_ptr<LocalGroup>> Create(
      const LocalGroupOptions& options);

  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;
  // Closes the process group and, on rank 0, the store. Other ranks should
  // be done with the group by then.
  ~LocalGroup();

  // Replaces every tensor by the mean of that tensor over all ranks. The
  // tensors must be defined, dense, floating point, and all on one device
  // (they may differ in dtype and be non-contiguous). They are packed into
  // one flat buffer per dtype, so a call costs one collective per dtype.
  // Blocks until the result is in the tensors (CPU) or has been ordered on
  // the current CUDA stream (CUDA). Size 1: returns at once, tensors as is.
  absl::Status AllReduceMean(std::vector<at::Tensor>& tensors);

  // Copies rank root's tensors into the same tensors of every other rank.
  // Same requirements on the tensors as AllReduceMean, except that any dtype
  // is allowed; root must be in [0, size).
  absl::Status Broadcast(std::vector<at::Tensor>& tensors, int root);

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  struct Backends;  // The store and the c10d process groups (local_group.cc).

  LocalGroup(int rank, int size, std::unique_ptr<Backends> backends);

  // Runs one collective, turning what libtorch throws into a status. A
  // failure breaks the group (broken_).
  absl::Status RunCollective(absl::string_view name,
                             absl::FunctionRef<absl::Status(Backends&)> body);

  // Constant after construction.
  const int rank_;
  const int size_;

  // Owned by the calling thread (see the thread-safety note above).
  std::unique_ptr<Backends> backends_;  // null when size_ == 1
  absl::Status broken_;                 // first collective failure, if any
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_LOCAL_GROUP_H_
