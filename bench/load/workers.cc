#include "bench/load/workers.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"

namespace gradwire::bench {
namespace {

constexpr uint64_t kHoldsNothing = UINT64_MAX;

std::unique_ptr<v1::ParameterServer::Stub> NewWorkerStub(
    const std::string& address) {
  grpc::ChannelArguments arguments;
  // The shards enforce their own --max-message-bytes; the client imposes no
  // second limit.
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), arguments));
}

// One RPC of a fan-out.
struct ShardCall {
  grpc::ClientContext context;
  grpc::Status status;
  absl::Time start;
  absl::Time end;
};

}  // namespace

void RunAbort::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_.store(true, std::memory_order_release);
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
}

void RunAbort::Register(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  in_flight_.insert(context);
  // Cancelling before the call starts makes it fail at once.
  if (aborted()) context->TryCancel();
}

void RunAbort::Unregister(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  in_flight_.erase(context);
}

void WorkerTally::Merge(const WorkerTally& other) {
  push_ms.insert(push_ms.end(), other.push_ms.begin(), other.push_ms.end());
  pull_ms.insert(pull_ms.end(), other.pull_ms.begin(), other.pull_ms.end());
  if (first_error.empty()) first_error = other.first_error;
  errors += other.errors;
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  delta_chunks += other.delta_chunks;
  dense_chunks += other.dense_chunks;
  chained_deltas += other.chained_deltas;
  pulled_bytes += other.pulled_bytes;
  dense_pull_bytes += other.dense_pull_bytes;
}

SimulatedWorker::SimulatedWorker(uint32_t id, const LoadBenchConfig& config,
                                 const LoadModel& model, WorkerPushes* pushes,
                                 const std::vector<std::string>& addresses,
                                 RunAbort* abort)
    : id_(id),
      config_(config),
      model_(model),
      pushes_(pushes),
      abort_(abort),
      rule_(MakeConsistencyRule(config.mode, config.staleness)),
      addresses_(addresses),
      versions_(model.partition->num_chunks(), kHoldsNothing),
      epochs_(addresses.size(), 0) {
  for (const std::string& address : addresses) {
    stubs_.push_back(NewWorkerStub(address));
  }
}

absl::Status SimulatedWorker::CallError(uint32_t shard, const char* rpc,
                                        uint64_t step,
                                        const grpc::Status& status) const {
  // Init comes before any step.
  const std::string when = absl::string_view(rpc) == "Init"
                               ? std::string()
                               : absl::StrCat(" of step ", step);
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("worker ", id_, ", shard ", shard, " (", addresses_[shard],
                   "), ", rpc, when, ": ", status.error_message()));
}

void SimulatedWorker::RecordError(const absl::Status& status) {
  if (tally_.errors++ == 0) tally_.first_error = status.ToString();
}

absl::Status SimulatedWorker::Init(std::vector<v1::InitRequest>* inits) {
  for (uint32_t s = 0; s < stubs_.size(); ++s) {
    v1::InitRequest& request = (*inits)[s];
    request.set_worker_id(id_);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + config_.rpc_timeout));
    v1::InitResponse response;
    const grpc::Status status = stubs_[s]->Init(&context, request, &response);
    request.set_worker_id(0);
    if (!status.ok()) return CallError(s, "Init", 0, status);
    for (uint64_t next : response.next_steps()) {
      if (next != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "worker ", id_, ", shard ", s,
            ": the shard says this worker "
            "already pushed step ",
            next - 1,
            " (restored from a checkpoint?); start from empty shards"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename Request, typename Response, typename Start>
absl::Status SimulatedWorker::FanOut(const char* rpc, uint64_t step,
                                     const std::vector<Request>& requests,
                                     std::vector<Response>* responses,
                                     std::vector<float>* latencies,
                                     Start start) {
  const uint32_t shards = static_cast<uint32_t>(stubs_.size());
  std::vector<ShardCall> calls(shards);
  responses->resize(shards);
  absl::BlockingCounter pending(static_cast<int>(shards));
  for (uint32_t s = 0; s < shards; ++s) {
    ShardCall& call = calls[s];
    call.context.set_deadline(
        absl::ToChronoTime(absl::Now() + config_.rpc_timeout));
    abort_->Register(&call.context);
    tally_.bytes_sent += requests[s].ByteSizeLong();
    call.start = absl::Now();
    start(stubs_[s].get(), &call.context, &requests[s], &(*responses)[s],
          [&call, &pending](grpc::Status status) {
            call.end = absl::Now();
            call.status = std::move(status);
            pending.DecrementCount();
          });
  }
  pending.Wait();
  absl::Status first;
  for (uint32_t s = 0; s < shards; ++s) {
    ShardCall& call = calls[s];
    abort_->Unregister(&call.context);
    if (call.status.ok()) {
      latencies->push_back(static_cast<float>(
          absl::ToDoubleMilliseconds(call.end - call.start)));
      tally_.bytes_received += (*responses)[s].ByteSizeLong();
      continue;
    }
    const absl::Status error = CallError(s, rpc, step, call.status);
    // Cancelled because another worker failed: not an error of its own.
    const bool aborted =
        call.status.error_code() == grpc::StatusCode::CANCELLED &&
        abort_->aborted();
    if (!aborted) RecordError(error);
    if (first.ok()) first = error;
  }
  return first;
}

absl::Status SimulatedWorker::PushStep(uint64_t step) {
  std::vector<v1::PushRequest>& requests =
      pushes_->variants[step % pushes_->variants.size()];
  for (v1::PushRequest& request : requests) request.set_step(step);
  std::vector<v1::PushResponse> responses;
  return FanOut("Push", step, requests, &responses, &tally_.push_ms,
                [](v1::ParameterServer::Stub* stub, grpc::ClientContext* c,
                   const v1::PushRequest* request, v1::PushResponse* response,
                   auto done) {
                  stub->async()->Push(c, request, response, std::move(done));
                });
}

absl::Status SimulatedWorker::PullStep(uint64_t step) {
  std::vector<v1::PullRequest> requests(stubs_.size());
  for (uint32_t s = 0; s < requests.size(); ++s) {
    requests[s].set_worker_id(id_);
    requests[s].set_allow_delta(config_.delta_pulls);
    requests[s].set_allow_delta_chain(config_.delta_pulls);
  }
  for (const ChunkSpec& spec : model_.partition->chunks()) {
    v1::ChunkPull* pull = requests[spec.shard].add_chunks();
    pull->set_key(spec.key);
    pull->set_have_version(versions_[spec.key]);
    pull->set_have_epoch(epochs_[spec.shard]);
    pull->set_min_step(rule_->MinStepToPull(step));
  }
  std::vector<v1::PullResponse> responses;
  absl::Status s =
      FanOut("Pull", step, requests, &responses, &tally_.pull_ms,
             [](v1::ParameterServer::Stub* stub, grpc::ClientContext* c,
                const v1::PullRequest* request, v1::PullResponse* response,
                auto done) {
               stub->async()->Pull(c, request, response, std::move(done));
             });
  for (uint32_t shard = 0; s.ok() && shard < responses.size(); ++shard) {
    s = ApplyPulled(shard, responses[shard]);
    if (!s.ok()) {
      s = absl::Status(
          s.code(), absl::StrCat("worker ", id_, ", shard ", shard,
                                 ", Pull of step ", step, ": ", s.message()));
      RecordError(s);
    }
  }
  return s;
}

absl::Status SimulatedWorker::ApplyPulled(uint32_t shard,
                                          const v1::PullResponse& response) {
  const Partition& partition = *model_.partition;
  if (response.chunks_size() !=
      static_cast<int>(partition.ChunksOfShard(shard).size())) {
    return absl::InternalError(
        absl::StrCat("answered ", response.chunks_size(), " chunks, asked for ",
                     partition.ChunksOfShard(shard).size()));
  }
  tally_.pulled_bytes += response.ByteSizeLong();
  for (const v1::ChunkWeights& weights : response.chunks()) {
    const ChunkSpec* spec = partition.FindChunk(weights.key());
    if (spec == nullptr || spec->shard != shard) {
      return absl::InternalError(
          absl::StrCat("answered chunk ", weights.key(), ", not asked for"));
    }
    tally_.dense_pull_bytes += spec->numel * sizeof(float);
    DecodeOptions decode;
    decode.expected_numel = spec->numel;
    for (int i = 0; i <= weights.chain_size(); ++i) {
      const v1::ChunkData& data =
          i == 0 ? weights.data() : weights.chain(i - 1);
      if (absl::Status s = DecodeChunk(data, decode, &decoded_); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("chunk ", spec->key, ": ", s.message()));
      }
    }
    if (!weights.is_delta() && weights.chain_size() != 0) {
      return absl::InternalError(
          absl::StrCat("chunk ", spec->key, ": dense weights with a chain"));
    }
    uint64_t& held = versions_[spec->key];
    if (weights.is_delta()) {
      if (weights.version() < held) {
        return absl::InternalError(
            absl::StrCat("chunk ", spec->key, ": a delta to version ",
                         weights.version(), " for a worker at ", held));
      }
      ++tally_.delta_chunks;
      tally_.chained_deltas += weights.chain_size();
    } else {
      ++tally_.dense_chunks;
    }
    held = weights.version();
  }
  epochs_[shard] = response.history_epoch();
  return absl::OkStatus();
}

void SimulatedWorker::RunSteps(uint64_t first, uint64_t end) {
  for (uint64_t step = first; step < end && !abort_->aborted(); ++step) {
    absl::Status s = PushStep(step);
    if (s.ok()) s = PullStep(step);
    if (!s.ok()) {
      abort_->Abort();
      return;
    }
  }
}

}  // namespace gradwire::bench
