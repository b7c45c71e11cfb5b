#include "worker/local_group.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <gloo/common/error.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace gradwire {
namespace {

// Gloo binds here: all ranks of the group are on this host.
constexpr char kLoopback[] = "127.0.0.1";

bool MentionsTimeout(absl::string_view message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "timed out") ||
         absl::StrContains(lower, "timeout");
}

absl::Status StatusFromMessage(absl::string_view context,
                               absl::string_view message,
                               absl::StatusCode otherwise) {
  const absl::StatusCode code = MentionsTimeout(message)
                                    ? absl::StatusCode::kDeadlineExceeded
                                    : otherwise;
  return absl::Status(code, absl::StrCat(context, ": ", message));
}

// Runs body and turns what libtorch, c10d and gloo throw into a status.
// c10d reports most timeouts as a plain c10::Error, hence the message check.
template <typename Body>
absl::Status CatchTorch(absl::string_view context, absl::StatusCode otherwise,
                        Body&& body) {
  try {
    return body();
  } catch (const c10d::TimeoutError& e) {
    return absl::DeadlineExceededError(absl::StrCat(context, ": ", e.what()));
  } catch (const c10::Error& e) {
    return StatusFromMessage(context, e.what_without_backtrace(), otherwise);
  } catch (const gloo::IoException& e) {
    return StatusFromMessage(context, e.what(), absl::StatusCode::kUnavailable);
  } catch (const std::exception& e) {
    return StatusFromMessage(context, e.what(), otherwise);
  }
}

absl::Status ValidateOptions(const LocalGroupOptions& options) {
  if (options.size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("local group: size %d, want >= 1", options.size));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local group: rank %d not in [0, %d)", options.rank, options.size));
  }
  if (options.size == 1) return absl::OkStatus();
  if (options.store_host.empty()) {
    return absl::InvalidArgumentError("local group: empty store host");
  }
  if (options.store_port < 1 || options.store_port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local group: store port %d not in [1, 65535]", options.store_port));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("local group: timeout must be > 0");
  }
  return absl::OkStatus();
}

// CPU always works (Gloo); CUDA only with a libtorch that has NCCL.
absl::Status CheckDeviceSupported(const c10::Device& device) {
  if (device.is_cpu()) return absl::OkStatus();
#ifdef USE_C10D_NCCL
  if (device.is_cuda()) return absl::OkStatus();
#else
  if (device.is_cuda()) {
    return absl::UnimplementedError(
        "local group: this libtorch has no NCCL; CUDA tensors cannot be "
        "reduced inside the node (link a libtorch built with CUDA and NCCL, "
        "or move the tensors to the CPU)");
  }
#endif
  return absl::InvalidArgumentError(absl::StrCat(
      "local group: tensors on unsupported device ", device.str()));
}

// Checks what every collective needs, before anything is sent.
absl::Status CheckTensors(const std::vector<at::Tensor>& tensors,
                          bool floating_only) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("local group: tensor %d is undefined", i));
    }
    if (t.layout() != at::kStrided) {
      return absl::InvalidArgumentError(
          absl::StrFormat("local group: tensor %d is not dense", i));
    }
    if (floating_only && !t.is_floating_point()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "local group: tensor %d has dtype %s; the mean needs floats", i,
          std::string(c10::toString(t.scalar_type()))));
    }
    if (t.device() != tensors[0].device()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("local group: tensor %d is on %s, tensor 0 on %s", i,
                          t.device().str(), tensors[0].device().str()));
    }
  }
  if (tensors.empty()) return absl::OkStatus();
  return CheckDeviceSupported(tensors[0].device());
}

// Indices of the tensors of each dtype, dtypes in order of first appearance,
// so that every rank (same tensor list) makes the same buckets.
std::vector<std::vector<size_t>> BucketsByDtype(
    const std::vector<at::Tensor>& tensors) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<at::ScalarType> dtypes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t b = 0;
    while (b < dtypes.size() && dtypes[b] != tensors[i].scalar_type()) ++b;
    if (b == dtypes.size()) {
      dtypes.push_back(tensors[i].scalar_type());
      buckets.emplace_back();
    }
    buckets[b].push_back(i);
  }
  return buckets;
}

// One contiguous 1-D buffer holding the bucket's tensors back to back. A
// bucket of one contiguous tensor is used as is (no copy).
at::Tensor Pack(const std::vector<at::Tensor>& tensors,
                const std::vector<size_t>& bucket) {
  if (bucket.size() == 1 && tensors[bucket[0]].is_contiguous()) {
    return tensors[bucket[0]].view({-1});
  }
  std::vector<at::Tensor> flat_views;
  flat_views.reserve(bucket.size());
  for (size_t i : bucket) flat_views.push_back(tensors[i].reshape({-1}));
  return at::cat(flat_views);
}

// Copies a buffer made by Pack back into the bucket's tensors.
void Unpack(const at::Tensor& flat, const std::vector<size_t>& bucket,
            std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (size_t i : bucket) {
    at::Tensor& t = tensors[i];
    const int64_t numel = t.numel();
    if (numel > 0 && t.data_ptr() != flat.data_ptr()) {
      t.copy_(flat.narrow(0, offset, numel).view(t.sizes()));
    }
    offset += numel;
  }
}

// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that died makes
// the next write raise SIGPIPE, whose default action ends this process
// without a word. Ignored, the write fails with EPIPE and the collective
// with an error the caller sees. A handler the program installed itself is
// left alone.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current = {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

// The rendezvous store and the c10d process groups of a group of size > 1.
// Members are destroyed in reverse order: the process groups before the
// store they were connected through.
struct LocalGroup::Backends {
  int rank = 0;
  int size = 0;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> gloo;
#ifdef USE_C10D_NCCL
  // Connected on the first CUDA call: a CUDA libtorch on a host without GPUs
  // must still be able to run the CPU path, and ProcessGroupNCCL refuses to
  // start without one.
  c10::intrusive_ptr<c10d::ProcessGroup> nccl;
#endif

  // Starts or reaches the store, waits until every rank has joined, then
  // connects Gloo. May throw.
  absl::Status Connect(const LocalGroupOptions& options) {
    rank = options.rank;
    size = options.size;
    timeout = absl::ToChronoMilliseconds(options.timeout);
    const absl::Time deadline = absl::Now() + options.timeout;
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.store_port);
    store_options.isServer = rank == 0;
    // TCPStore's own wait for workers gives up silently in 1.13; the join
    // below reports who is missing instead.
    store_options.waitWorkers = false;
    store_options.timeout = timeout;
    store =
        c10::make_intrusive<c10d::TCPStore>(options.store_host, store_options);
    if (absl::Status s = WaitForAllRanks(deadline); !s.ok()) return s;
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_options->devices = {
        c10d::ProcessGroupGloo::createDeviceForHostname(kLoopback)};
    gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", store), rank, size,
        gloo_options);
    return absl::OkStatus();
  }

  // Announces this rank in the store and polls until all ranks have. Polls
  // with check() rather than a blocking wait(): a TCPStore wait that timed
  // out leaves an answer in flight that would garble the next request.
  absl::Status WaitForAllRanks(absl::Time deadline) {
    store->set(JoinKey(rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(JoinKey(r));
    while (!store->check(keys)) {
      if (absl::Now() >= deadline) {
        std::vector<int> missing;
        for (int r = 0; r < size; ++r) {
          if (!store->check({JoinKey(r)})) missing.push_back(r);
        }
        return absl::DeadlineExceededError(
            absl::StrFormat("local rank(s) %s did not join within %s",
                            absl::StrJoin(missing, ","),
                            absl::FormatDuration(absl::FromChrono(timeout))));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::OkStatus();
  }

  static std::string JoinKey(int rank) {
    return absl::StrCat("gradwire/joined/", rank);
  }

  // The process group for tensors on `device` (a device that
  // CheckDeviceSupported accepted). May throw.
  c10d::ProcessGroup& GroupFor(const c10::Device& device) {
#ifdef USE_C10D_NCCL
    if (device.is_cuda()) {
      if (!nccl) {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            c10::make_intrusive<c10d::PrefixStore>("nccl", store), rank, size,
            options);
      }
      return *nccl;
    }
#endif
    return *gloo;
  }

  // Blocks until `work` is done (CPU) or ordered on the current stream
  // (CUDA); throws on failure or after `timeout`.
  void Wait(const c10::intrusive_ptr<c10d::Work>& work) const {
    work->wait(timeout);
  }
};

absl::StatusOr<std::unique_ptr<LocalGroup>> LocalGroup::Create(
    const LocalGroupOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::unique_ptr<Backends> backends;
  if (options.size > 1) {
    IgnoreSigpipeUnlessHandled();
    backends = std::make_unique<Backends>();
    const std::string context = absl::StrFormat(
        "local group rank %d/%d: rendezvous at %s:%d (hosted by local rank 0)",
        options.rank, options.size, options.store_host, options.store_port);
    absl::Status connected =
        CatchTorch(context, absl::StatusCode::kUnavailable, [&] {
          absl::Status s = backends->Connect(options);
          if (s.ok()) return s;
          return absl::Status(s.code(),
                              absl::StrCat(context, ": ", s.message()));
        });
    if (!connected.ok()) return connected;
  }
  return std::unique_ptr<LocalGroup>(
      new LocalGroup(options.rank, options.size, std::move(backends)));
}

LocalGroup::LocalGroup(int rank, int size, std::unique_ptr<Backends> backends)
    : rank_(rank), size_(size), backends_(std::move(backends)) {}

// Out of line: Backends is complete only here.
LocalGroup::~LocalGroup() = default;

absl::Status LocalGroup::AllReduceMean(std::vector<at::Tensor>& tensors) {
  if (!broken_.ok()) return broken_;
  if (absl::Status s = CheckTensors(tensors, /*floating_only=*/true); !s.ok()) {
    return s;
  }
  if (size_ == 1 || tensors.empty()) return absl::OkStatus();
  return RunCollective("all-reduce", [&](Backends& backends) {
    c10d::ProcessGroup& group = backends.GroupFor(tensors[0].device());
    for (const std::vector<size_t>& bucket : BucketsByDtype(tensors)) {
      at::Tensor flat = Pack(tensors, bucket);
      if (flat.numel() == 0) continue;
      std::vector<at::Tensor> buffers = {flat};
      c10d::AllreduceOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      options.timeout = backends.timeout;
      backends.Wait(group.allreduce(buffers, options));
      flat.div_(size_);
      Unpack(flat, bucket, tensors);
    }
    return absl::OkStatus();
  });
}

absl::Status LocalGroup::Broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (!broken_.ok()) return broken_;
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local group: broadcast root %d not in [0, %d)", root, size_));
  }
  if (absl::Status s = CheckTensors(tensors, /*floating_only=*/false);
      !s.ok()) {
    return s;
  }
  if (size_ == 1 || tensors.empty()) return absl::OkStatus();
  return RunCollective("broadcast", [&](Backends& backends) {
    c10d::ProcessGroup& group = backends.GroupFor(tensors[0].device());
    for (const std::vector<size_t>& bucket : BucketsByDtype(tensors)) {
      at::Tensor flat = Pack(tensors, bucket);
      if (flat.numel() == 0) continue;
      std::vector<at::Tensor> buffers = {flat};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      options.rootTensor = 0;
      options.timeout = backends.timeout;
      backends.Wait(group.broadcast(buffers, options));
      if (rank_ != root) Unpack(flat, bucket, tensors);
    }
    return absl::OkStatus();
  });
}

absl::Status LocalGroup::RunCollective(
    absl::string_view name, absl::FunctionRef<absl::Status(Backends&)> body) {
  const std::string context =
      absl::StrFormat("local group rank %d/%d: %s", rank_, size_, name);
  absl::Status status = CatchTorch(context, absl::StatusCode::kInternal, [&] {
    // In-place writes into tensors that require grad (parameters) are
    // fine here: this is a copy of data, not part of the graph.
    at::NoGradGuard no_grad;
    return body(*backends_);
  });
  if (!status.ok()) {
    broken_ = absl::FailedPreconditionError(absl::StrCat(
        "local group is broken by an earlier failure (create a new one on "
        "every rank): ",
        status.ToString()));
  }
  return status;
}

}  // namespace gradwire
