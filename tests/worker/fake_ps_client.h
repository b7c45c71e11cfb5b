// FakePsClient: a PsClient over in-memory gradwire::Shard objects, for unit
// tests of code that talks to the parameter servers (the trainer) without
// gRPC or processes.
//
//   std::vector<std::shared_ptr<Shard>> shards = FakePsClient::MakeShards(2);
//   FakePsClient worker0(shards), worker1(shards);  // Two workers, one job.
//
// Requests go straight to Shard::Init/Push/Pull, shard by shard in the
// calling thread (a Shard never waits on another shard, so the order cannot
// deadlock); a Pull waits at most `pull_timeout`. Errors keep the shard's
// code; the message names the shard, as GrpcPsClient's do:
//   "shard 1 (in-memory): Push: chunk 5 is not owned by shard 1"
// Traffic is counted as GrpcPsClient counts it (request.ByteSizeLong() sent,
// response.ByteSizeLong() received); `retries` stays 0. Tests of retries
// make the next pushes or pulls fail (FailNextPushes, FailNextPulls).
//
// Thread safety: as PsClient, calls may run concurrently (Shard is
// thread-safe and the counters atomic); any number of clients may share
// shards from different threads.
#ifndef GRADWIRE_TESTS_WORKER_FAKE_PS_CLIENT_H_
#define GRADWIRE_TESTS_WORKER_FAKE_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "server/shard/shard.h"

namespace gradwire::testing {

class FakePsClient final : public PsClient {
 public:
  // `num_shards` fresh shards; shard i gets `options` with shard_id = i and
  // num_shards = `num_shards`.
  static std::vector<std::shared_ptr<Shard>> MakeShards(
      uint32_t num_shards, ShardOptions options = ShardOptions()) {
    std::vector<std::shared_ptr<Shard>> shards;
    for (uint32_t i = 0; i < num_shards; ++i) {
      options.shard_id = i;
      options.num_shards = num_shards;
      shards.push_back(std::make_shared<Shard>(options));
    }
    return shards;
  }

  // Talks to `shards` (shard id = index; none may be null), which the
  // client shares with whoever else holds them.
  explicit FakePsClient(std::vector<std::shared_ptr<Shard>> shards,
                        absl::Duration pull_timeout = absl::Seconds(5))
      : shards_(std::move(shards)), pull_timeout_(pull_timeout) {}

  // Counts every non-empty push request (one per shard a Push reaches)
  // into `*count` as well, which must outlive the client.
  void CountPushRequestsIn(std::atomic<uint64_t>* count) {
    push_requests_ = count;
  }

  // The next `count` Push calls fail with UNAVAILABLE: with `delivered`,
  // after every shard has taken its request (the answer was lost on the way
  // back); without, before any shard sees it.
  void FailNextPushes(int count, bool delivered) {
    push_failures_delivered_ = delivered;
    push_failures_ = count;
  }
  // The next `count` Pull calls fail with UNAVAILABLE before any shard sees
  // them.
  void FailNextPulls(int count) { pull_failures_ = count; }

  uint32_t num_shards() const override {
    return static_cast<uint32_t>(shards_.size());
  }
  // Shard `id`, for tests that inspect it (Info(), StateDigest()).
  Shard& shard(uint32_t id) const { return *shards_.at(id); }

  absl::Status Init(const std::vector<v1::InitRequest>& requests,
                    std::vector<v1::InitResponse>* responses) override {
    return ForEachShard("Init", requests, responses, &counters_.init_sent,
                        &counters_.init_received,
                        [](Shard& shard, const v1::InitRequest& request,
                           v1::InitResponse* response) {
                          return shard.Init(request, response);
                        });
  }

  absl::Status Push(const std::vector<v1::PushRequest>& requests,
                    std::vector<v1::PushResponse>* responses) override {
    const bool fail = TakeFailure(&push_failures_);
    if (fail && !push_failures_delivered_) {
      return absl::UnavailableError("in-memory: Push: failure injected");
    }
    if (push_requests_ != nullptr) {
      for (const v1::PushRequest& request : requests) {
        if (!request.chunks().empty()) ++*push_requests_;
      }
    }
    absl::Status pushed =
        ForEachShard("Push", requests, responses, &counters_.push_sent,
                     &counters_.push_received,
                     [](Shard& shard, const v1::PushRequest& request,
                        v1::PushResponse* response) {
                       return shard.Push(request, response);
                     });
    if (fail && pushed.ok()) {
      return absl::UnavailableError(
          "in-memory: Push: failure injected after delivery");
    }
    return pushed;
  }

  absl::Status Pull(const std::vector<v1::PullRequest>& requests,
                    std::vector<v1::PullResponse>* responses) override {
    if (TakeFailure(&pull_failures_)) {
      return absl::UnavailableError("in-memory: Pull: failure injected");
    }
    const absl::Time deadline = absl::Now() + pull_timeout_;
    return ForEachShard("Pull", requests, responses, &counters_.pull_sent,
                        &counters_.pull_received,
                        [deadline](Shard& shard, const v1::PullRequest& request,
                                   v1::PullResponse* response) {
                          return shard.Pull(request, deadline, response);
                        });
  }

  TrafficStats traffic() const override {
    TrafficStats stats;
    stats.init_bytes_sent = counters_.init_sent.load();
    stats.init_bytes_received = counters_.init_received.load();
    stats.push_bytes_sent = counters_.push_sent.load();
    stats.push_bytes_received = counters_.push_received.load();
    stats.pull_bytes_sent = counters_.pull_sent.load();
    stats.pull_bytes_received = counters_.pull_received.load();
    return stats;
  }

 private:
  struct Counters {
    std::atomic<uint64_t> init_sent{0}, init_received{0};
    std::atomic<uint64_t> push_sent{0}, push_received{0};
    std::atomic<uint64_t> pull_sent{0}, pull_received{0};
  };

  // Whether this call is one of the failures still to inject in *left
  // (taking it if so).
  static bool TakeFailure(std::atomic<int>* left) {
    int n = left->load();
    while (n > 0) {
      if (left->compare_exchange_weak(n, n - 1)) return true;
    }
    return false;
  }

  // Checks the request count, then runs `call` for every non-empty request
  // and returns the error of the lowest shard that failed, as GrpcPsClient
  // does (a failure on one shard does not stop the others).
  template <typename Request, typename Response, typename Call>
  absl::Status ForEachShard(absl::string_view rpc,
                            const std::vector<Request>& requests,
                            std::vector<Response>* responses,
                            std::atomic<uint64_t>* sent,
                            std::atomic<uint64_t>* received, Call call) {
    if (requests.size() != shards_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(requests.size(), " requests for ", shards_.size(),
                       " shards; pass one per shard"));
    }
    responses->assign(shards_.size(), Response());
    absl::Status first_error;
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (requests[i].chunks().empty()) continue;
      *sent += requests[i].ByteSizeLong();
      const absl::Status status =
          call(*shards_[i], requests[i], &(*responses)[i]);
      if (status.ok()) {
        *received += (*responses)[i].ByteSizeLong();
      } else if (first_error.ok()) {
        first_error = absl::Status(
            status.code(), absl::StrCat("shard ", i, " (in-memory): ", rpc,
                                        ": ", status.message()));
      }
    }
    return first_error;
  }

  // Constant after construction.
  const std::vector<std::shared_ptr<Shard>> shards_;
  const absl::Duration pull_timeout_;

  Counters counters_;
  std::atomic<uint64_t>* push_requests_ = nullptr;
  std::atomic<int> push_failures_{0};
  std::atomic<bool> push_failures_delivered_{false};
  std::atomic<int> pull_failures_{0};
};

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_WORKER_FAKE_PS_CLIENT_H_
