#include "bench/server/push.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/aliased_request.h"
#include "common/usable_cpus.h"
#include "grpcpp/grpcpp.h"
#include "server/process/parameter_server_service.h"
#include "server/shard/shard.h"

namespace gradwire::bench {
namespace {

// ServerOptions::max_message_bytes' default, on both ends.
constexpr int kMaxMessageBytes = 64 << 20;

std::chrono::system_clock::time_point CallDeadline() {
  return std::chrono::system_clock::now() +
         std::chrono::seconds(kCallDeadlineSeconds);
}

ShardOptions ShardOptionsWith(int apply_threads) {
  ShardOptions options;
  options.apply_threads = apply_threads;
  return options;
}

absl::Status InitShard(const v1::InitRequest& init, Shard* shard) {
  v1::InitResponse response;
  return shard->Init(init, &response);
}

class InProcessTarget final : public PushTarget {
 public:
  explicit InProcessTarget(int apply_threads)
      : shard_(ShardOptionsWith(apply_threads)) {}

  absl::Status Init(const v1::InitRequest& init) {
    return InitShard(init, &shard_);
  }
  absl::Status Push(uint32_t /*pusher*/,
                    const v1::PushRequest& request) override {
    v1::PushResponse response;
    return shard_.Push(request, &response);
  }
  uint64_t updates_applied() const override { return shard_.updates_applied(); }
  double stage_seconds(PushStage stage) const override {
    return shard_.metrics().PushStageSeconds(stage);
  }

 private:
  Shard shard_;
};

// The shard server's thread counts: one handler thread per usable CPU.
ParameterServerServiceOptions ServiceOptions() {
  ParameterServerServiceOptions options;
  options.handler_threads = std::max(2, UsableCpus());
  return options;
}

class GrpcTarget final : public PushTarget {
 public:
  explicit GrpcTarget(int apply_threads)
      : shard_(ShardOptionsWith(apply_threads)),
        service_(&shard_, /*activity=*/nullptr, ServiceOptions()) {}
  ~GrpcTarget() override {
    if (server_ == nullptr) return;
    service_.BeginShutdown();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    server_->Wait();
    service_.StopPools();
  }

  absl::Status Start(const v1::InitRequest& init, uint32_t pushers) {
    if (absl::Status s = InitShard(init, &shard_); !s.ok()) return s;
    if (absl::Status s = Serve(); !s.ok()) return s;
    for (uint32_t w = 0; w < pushers; ++w) {
      if (absl::Status s = Connect(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::Status Push(uint32_t pusher, const v1::PushRequest& request) override {
    grpc::ClientContext context;
    context.set_deadline(CallDeadline());
    v1::PushResponse response;
    const grpc::Status s = stubs_[pusher]->Push(&context, request, &response);
    if (s.ok()) return absl::OkStatus();
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("gRPC Push: ", s.error_message()));
  }
  uint64_t updates_applied() const override { return shard_.updates_applied(); }
  double stage_seconds(PushStage stage) const override {
    return shard_.metrics().PushStageSeconds(stage);
  }

 private:
  absl::Status Serve() {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError("cannot listen on 127.0.0.1:0");
    }
    return absl::OkStatus();
  }

  // A channel of its own (own subchannel pool, so its own connection).
  absl::Status Connect() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    const std::string address = absl::StrCat("127.0.0.1:", port_);
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(CallDeadline())) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect to the gRPC server at ", address));
    }
    stubs_.push_back(std::make_unique<AliasedPushStub>(std::move(channel)));
    return absl::OkStatus();
  }

  // Constant after Start.
  Shard shard_;
  ParameterServerService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  // The worker's Push: the request's bulk bytes are sent, not copied.
  std::vector<std::unique_ptr<AliasedPushStub>> stubs_;
};

// The first error, preferring one that is not a consequence of another.
absl::Status FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok() && !absl::IsCancelled(s) && !absl::IsDeadlineExceeded(s)) {
      return s;
    }
  }
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// Pushers meet here after each BSP round. Cancel() releases every waiter
// (a pusher failed, so the others cannot complete the round).
class RoundBarrier {
 public:
  explicit RoundBarrier(uint32_t parties) : parties_(parties) {}

  // Waits until all parties arrived. False when cancelled or when the others
  // did not arrive within kCallDeadlineSeconds.
  bool ArriveAndWait() {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return false;
    const uint64_t generation = generation_;
    if (++waiting_ == parties_) {
      waiting_ = 0;
      ++generation_;
      return true;
    }
    auto released = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || generation_ != generation;
    };
    mu_.AwaitWithTimeout(absl::Condition(&released),
                         absl::Seconds(kCallDeadlineSeconds));
    return !cancelled_ && generation_ != generation;
  }

  void Cancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

 private:
  const uint32_t parties_;
  absl::Mutex mu_;
  uint32_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<PushTarget>> StartInProcess(
    const v1::InitRequest& init, int apply_threads) {
  auto target = std::make_unique<InProcessTarget>(apply_threads);
  if (absl::Status s = target->Init(init); !s.ok()) return s;
  return target;
}

absl::StatusOr<std::unique_ptr<PushTarget>> StartGrpc(
    const v1::InitRequest& init, uint32_t pushers, int apply_threads) {
  auto target = std::make_unique<GrpcTarget>(apply_threads);
  if (absl::Status s = target->Start(init, pushers); !s.ok()) return s;
  return target;
}

PusherPool::PusherPool(absl::Span<PusherLoad> loads, uint32_t pushers,
                       bool barrier_per_round, PushTarget* target)
    : loads_(loads),
      pushers_(pushers),
      target_(target),
      barrier_(barrier_per_round ? std::make_unique<RoundBarrier>(pushers)
                                 : nullptr),
      results_(pushers) {
  assert(pushers > 0 && pushers <= loads.size());
  threads_.reserve(pushers);
  for (uint32_t w = 0; w < pushers; ++w) {
    threads_.emplace_back([this, w] { Loop(w); });
  }
}

PusherPool::~PusherPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

absl::Status PusherPool::Run(uint64_t first_step, int rounds) {
  if (failed_.load()) {
    return absl::FailedPreconditionError("a pusher failed in an earlier run");
  }
  absl::MutexLock lock(&mu_);
  first_step_ = first_step;
  rounds_ = rounds;
  finished_ = 0;
  ++generation_;
  auto all_finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ == threads_.size();
  };
  // Bounded: every push and barrier wait has a deadline.
  mu_.Await(absl::Condition(&all_finished));
  return FirstError(results_);
}

void PusherPool::Loop(uint32_t pusher) {
  uint64_t done_generation = 0;
  while (true) {
    uint64_t first_step = 0;
    int rounds = 0;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this, done_generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || generation_ != done_generation;
      };
      mu_.Await(absl::Condition(&wake));
      if (stopping_) return;
      done_generation = generation_;
      first_step = first_step_;
      rounds = rounds_;
    }
    // Pushes run without mu_.
    absl::Status status = PushAll(pusher, first_step, rounds);
    if (!status.ok()) {
      failed_.store(true);
      if (barrier_ != nullptr) barrier_->Cancel();
    }
    absl::MutexLock lock(&mu_);
    results_[pusher] = std::move(status);
    ++finished_;
  }
}

PusherLoad& PusherPool::LoadFor(uint32_t pusher, int round) const {
  const size_t own = (loads_.size() - 1 - pusher) / pushers_ + 1;
  return loads_[pusher + pushers_ * (static_cast<size_t>(round) % own)];
}

absl::Status PusherPool::PushAll(uint32_t pusher, uint64_t first_step,
                                 int rounds) {
  for (int r = 0; r < rounds; ++r) {
    const uint64_t step = first_step + r;
    // Rounds continue across Runs: the step numbers them.
    PusherLoad& load = LoadFor(pusher, static_cast<int>(step % (1u << 30)));
    const size_t n = load.requests.size();
    const size_t start = pusher * n / pushers_;
    for (size_t i = 0; i < n; ++i) {
      if (failed_.load(std::memory_order_relaxed)) {
        return absl::CancelledError("another pusher failed");
      }
      v1::PushRequest& request = load.requests[(start + i) % n];
      request.set_worker_id(pusher);
      request.set_step(step);
      if (absl::Status s = target_->Push(pusher, request); !s.ok()) {
        return absl::Status(
            s.code(),
            absl::StrCat("pusher ", pusher, ", step ", step, ", chunk ",
                         request.chunks(0).key(), ": ", s.message()));
      }
    }
    if (barrier_ != nullptr && !barrier_->ArriveAndWait()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "pusher ", pusher, ": the other pushers did not finish step ", step,
          " (one failed or stalled)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
