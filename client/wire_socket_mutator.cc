// AttachWireCounters (wire_counters.h): gRPC's socket mutator, through which
// a channel or server reports every socket it creates.
//
// gRPC installs grpc_socket_mutator's declaration
// (src/core/lib/iomgr/socket_mutator.h) only with its sources: the channel
// argument takes a pointer to a struct whose layout this file repeats. That
// layout (a vtable pointer, then a gpr_refcount; the vtable mutate_fd,
// compare, destroy, mutate_fd_2) has been the same since gRPC 1.43.
#include <grpc/support/sync.h>

#include <memory>
#include <utility>

#include "client/wire_counters.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/version_info.h"

#if GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR < 43
#error "wire counters need gRPC 1.43 or newer (grpc_socket_mutator_vtable)"
#endif

namespace gradwire {
namespace {

// grpc_fd_usage.
enum FdUsage : int {
  kClientConnection = 0,
  kServerListener = 1,
  kServerConnection = 2,
};

// grpc_mutate_socket_info.
struct MutateSocketInfo {
  int fd;
  FdUsage usage;
};

struct MutatorBase;

// grpc_socket_mutator_vtable.
struct MutatorVtable {
  bool (*mutate_fd)(int fd, MutatorBase* mutator);
  int (*compare)(MutatorBase* a, MutatorBase* b);
  void (*destroy)(MutatorBase* mutator);
  bool (*mutate_fd_2)(const MutateSocketInfo* info, MutatorBase* mutator);
};

// grpc_socket_mutator; gRPC reference-counts it and calls destroy at zero.
struct MutatorBase {
  const MutatorVtable* vtable;
  gpr_refcount refcount;
};

// Ours: the base first, so that a MutatorBase* is a WireMutator*.
struct WireMutator {
  MutatorBase base;
  std::shared_ptr<WireCounters> counters;
};

WireMutator* Self(MutatorBase* base) {
  return reinterpret_cast<WireMutator*>(base);
}

// Only connections carry bytes; a server's listening socket is left out.
bool TrackConnection(const MutateSocketInfo* info, MutatorBase* base) {
  if (info->usage != kServerListener) Self(base)->counters->Track(info->fd);
  return true;
}

// Never called while mutate_fd_2 is set; a client connection otherwise.
bool TrackClientConnection(int fd, MutatorBase* base) {
  Self(base)->counters->Track(fd);
  return true;
}

// Mutators compare equal only to themselves: channels that count into
// different counters must not share a pooled connection.
int CompareIdentity(MutatorBase* a, MutatorBase* b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

void Destroy(MutatorBase* base) { delete Self(base); }

constexpr MutatorVtable kWireMutatorVtable = {
    TrackClientConnection, CompareIdentity, Destroy, TrackConnection};

}  // namespace

void AttachWireCounters(std::shared_ptr<WireCounters> counters,
                        grpc::ChannelArguments* arguments) {
  auto* mutator =
      new WireMutator{{&kWireMutatorVtable, {}}, std::move(counters)};
  // One reference, which SetSocketMutator hands to the arguments.
  gpr_ref_init(&mutator->base.refcount, 1);
  arguments->SetSocketMutator(
      reinterpret_cast<grpc_socket_mutator*>(&mutator->base));
}

}  // namespace gradwire
