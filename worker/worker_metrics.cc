#include "worker/worker_metrics.h"

#include <atomic>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "common/metrics/histogram.h"

namespace gradwire {
namespace {

using metrics::Counter;
using metrics::Family;
using metrics::Gauge;
using metrics::Histogram;
using metrics::Labels;

constexpr const char* kRpcs[] = {"init", "push", "pull"};
constexpr int kNumRpcs = 3;

int RpcIndex(const char* rpc) {
  for (int i = 0; i < kNumRpcs; ++i) {
    if (std::strcmp(rpc, kRpcs[i]) == 0) return i;
  }
  return -1;
}

// A counter that follows a running total it does not own: each Follow adds
// what the total grew by since the last one.
struct FollowingCounter {
  Counter* counter = nullptr;
  std::atomic<uint64_t> seen{0};

  void Follow(uint64_t total) {
    const uint64_t before = seen.exchange(total, std::memory_order_relaxed);
    if (total > before) counter->Increment(static_cast<double>(total - before));
  }
};

// A counter of a family whose child appears only once there is a value to
// give it (wire bytes: absent, not 0, while unknown).
struct LateCounter {
  Family<Counter>* family = nullptr;
  Labels labels;
  std::atomic<Counter*> counter{nullptr};
  std::atomic<uint64_t> seen{0};

  // Only RecordWire calls it, from one thread at a time.
  void Follow(uint64_t total) {
    Counter* child = counter.load(std::memory_order_acquire);
    if (child == nullptr) {
      child = &family->Add(labels);
      counter.store(child, std::memory_order_release);
    }
    const uint64_t before = seen.exchange(total, std::memory_order_relaxed);
    if (total > before) child->Increment(static_cast<double>(total - before));
  }
  bool known() const {
    return counter.load(std::memory_order_acquire) != nullptr;
  }
  uint64_t Value() const {
    const Counter* child = counter.load(std::memory_order_acquire);
    return child == nullptr ? 0 : static_cast<uint64_t>(child->Value());
  }
};

// The CPU counters' activity labels: CpuActivity's, then the two the
// account derives.
constexpr int kNumCpuLabels = kNumCpuActivities + 2;

const char* CpuLabel(int i) {
  if (i < kNumCpuActivities) {
    return CpuActivityName(static_cast<CpuActivity>(i));
  }
  return i == kNumCpuActivities ? "other_threads" : "compute";
}

// A counter of seconds that follows a running total of seconds, in whole
// nanoseconds (a total that shrinks a little, as other_threads may while a
// scope spans a step's end, adds nothing until it has grown past its peak).
struct FollowingSeconds {
  Counter* counter = nullptr;
  std::atomic<int64_t> seen_ns{0};

  void Follow(double total_seconds) {
    const auto total = static_cast<int64_t>(total_seconds * 1e9);
    int64_t before = seen_ns.load(std::memory_order_relaxed);
    while (total > before && !seen_ns.compare_exchange_weak(before, total)) {
    }
    if (total > before) counter->Increment((total - before) * 1e-9);
  }
};

// gradwire_worker_cpu_seconds_total with one child per activity.
absl::Status AddCpuCounters(metrics::Registry* registry, const Labels& labels,
                            FollowingSeconds* cpu) {
  auto family = registry->AddCounterFamily(
      {"gradwire_worker_cpu_seconds_total",
       "CPU seconds of the worker process since Register, by activity: the "
       "communication's (compress, momentum, encode, rpc, decode, copy, "
       "sync_other, other_threads) and the training thread's compute."});
  if (!family.ok()) return family.status();
  for (int i = 0; i < kNumCpuLabels; ++i) {
    Labels with_activity = labels;
    with_activity["activity"] = CpuLabel(i);
    cpu[i].counter = &(*family)->Add(with_activity);
  }
  return absl::OkStatus();
}

// A child to register: where to keep it, and its family's name and help.
template <typename Child>
struct ChildSpec {
  Child** slot;
  const char* name;
  const char* help;
};

// Registers each spec's family in `registry` and keeps its child for
// `labels`; the first error stops it.
absl::Status AddCounters(metrics::Registry* registry, const Labels& labels,
                         const std::vector<ChildSpec<Counter>>& specs) {
  for (const ChildSpec<Counter>& spec : specs) {
    auto family = registry->AddCounterFamily({spec.name, spec.help});
    if (!family.ok()) return family.status();
    *spec.slot = &(*family)->Add(labels);
  }
  return absl::OkStatus();
}

absl::Status AddGauges(metrics::Registry* registry, const Labels& labels,
                       const std::vector<ChildSpec<Gauge>>& specs) {
  for (const ChildSpec<Gauge>& spec : specs) {
    auto family = registry->AddGaugeFamily({spec.name, spec.help});
    if (!family.ok()) return family.status();
    *spec.slot = &(*family)->Add(labels);
  }
  return absl::OkStatus();
}

// Histograms of seconds, from 1 ms to about 65 s: a step of a small model
// on a fast link up to a pull that waits for a straggler.
absl::Status AddHistograms(metrics::Registry* registry, const Labels& labels,
                           const std::vector<ChildSpec<Histogram>>& specs) {
  const std::vector<double> seconds = metrics::ExponentialBuckets(0.001, 2, 17);
  for (const ChildSpec<Histogram>& spec : specs) {
    auto family = registry->AddHistogramFamily({spec.name, spec.help}, seconds);
    if (!family.ok()) return family.status();
    *spec.slot = &(*family)->Add(labels);
  }
  return absl::OkStatus();
}

}  // namespace

struct WorkerMetrics::Children {
  FollowingCounter sent[kNumRpcs];
  FollowingCounter received[kNumRpcs];
  FollowingCounter retries;
  LateCounter wire_sent;
  LateCounter wire_received;
  Counter* dense_equivalent = nullptr;
  Counter* steps = nullptr;
  Histogram* step_seconds = nullptr;
  Histogram* reduce_seconds = nullptr;
  Histogram* compress_seconds = nullptr;
  Histogram* push_seconds = nullptr;
  Histogram* pull_seconds = nullptr;
  Histogram* pull_wait_seconds = nullptr;
  Gauge* residual_norm = nullptr;
  Gauge* compression_state_bytes = nullptr;
  Gauge* startup_bytes = nullptr;
  Gauge* startup_seconds = nullptr;
  Gauge* loss = nullptr;
  Gauge* samples_per_second = nullptr;
  Gauge* epoch = nullptr;
  FollowingSeconds cpu[kNumCpuLabels];
};

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(
    metrics::Registry* registry, const std::string& worker,
    const std::string& compressor) {
  auto children = std::make_unique<Children>();
  const Labels labels = {{"compressor", compressor}, {"worker", worker}};
  if (absl::Status s = AddTrafficFamilies(registry, labels, children.get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AddStepFamilies(registry, labels, children.get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AddTrainingFamilies(registry, labels, children.get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AddCpuCounters(registry, labels, children->cpu);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<WorkerMetrics>(new WorkerMetrics(std::move(children)));
}

absl::Status WorkerMetrics::AddTrafficFamilies(metrics::Registry* registry,
                                               const Labels& labels,
                                               Children* children) {
  for (const auto& [family_name, help, followers] :
       {std::make_tuple("gradwire_worker_sent_bytes_total",
                        "Serialized request bytes sent to the shards, by RPC "
                        "(retried attempts included).",
                        children->sent),
        std::make_tuple("gradwire_worker_received_bytes_total",
                        "Serialized response bytes received from the shards, "
                        "by RPC.",
                        children->received)}) {
    auto family = registry->AddCounterFamily({family_name, help});
    if (!family.ok()) return family.status();
    for (int i = 0; i < kNumRpcs; ++i) {
      Labels with_rpc = labels;
      with_rpc["rpc"] = kRpcs[i];
      followers[i].counter = &(*family)->Add(with_rpc);
    }
  }
  if (absl::Status s = AddWireFamilies(registry, labels, children); !s.ok()) {
    return s;
  }
  return AddCounters(
      registry, labels,
      {{&children->retries.counter, "gradwire_worker_rpc_retries_total",
        "RPC attempts after the first, over all shards and RPCs."},
       {&children->dense_equivalent,
        "gradwire_worker_dense_equivalent_bytes_total",
        "What fp32 dense pushes of the same gradients would have sent."}});
}

absl::Status WorkerMetrics::AddWireFamilies(metrics::Registry* registry,
                                            const Labels& labels,
                                            Children* children) {
  for (const auto& [family_name, help, follower] :
       {std::make_tuple("gradwire_worker_wire_sent_bytes_total",
                        "TCP stream bytes sent to the shards and acknowledged, "
                        "as the kernel counts them (payload plus HTTP/2, gRPC "
                        "and TLS framing).",
                        &children->wire_sent),
        std::make_tuple("gradwire_worker_wire_received_bytes_total",
                        "TCP stream bytes received from the shards, as the "
                        "kernel counts them.",
                        &children->wire_received)}) {
    auto family = registry->AddCounterFamily({family_name, help});
    if (!family.ok()) return family.status();
    follower->family = *family;
    follower->labels = labels;
  }
  return absl::OkStatus();
}

absl::Status WorkerMetrics::AddStepFamilies(metrics::Registry* registry,
                                            const Labels& labels,
                                            Children* children) {
  if (absl::Status s =
          AddCounters(registry, labels,
                      {{&children->steps, "gradwire_worker_steps_total",
                        "Training steps finished."}});
      !s.ok()) {
    return s;
  }
  return AddHistograms(
      registry, labels,
      std::vector<ChildSpec<Histogram>>{
          {&children->step_seconds, "gradwire_worker_step_seconds",
           "Duration of a whole synchronisation step."},
          {&children->reduce_seconds, "gradwire_worker_reduce_seconds",
           "Intra-node gradient reduction per step."},
          {&children->compress_seconds, "gradwire_worker_compress_seconds",
           "Compression with error feedback and encoding per step."},
          {&children->push_seconds, "gradwire_worker_push_seconds",
           "Push RPCs to all shards per step."},
          {&children->pull_seconds, "gradwire_worker_pull_seconds",
           "Pull RPCs, waiting included, per step."},
          {&children->pull_wait_seconds, "gradwire_worker_pull_wait_seconds",
           "Time the training thread waited for pulled weights per step "
           "(below pull_seconds when pulls run ahead)."}});
}

absl::Status WorkerMetrics::AddTrainingFamilies(metrics::Registry* registry,
                                                const Labels& labels,
                                                Children* children) {
  return AddGauges(
      registry, labels,
      {{&children->residual_norm, "gradwire_worker_residual_norm",
        "L2 norm of the error-feedback residuals after the last step."},
       {&children->compression_state_bytes,
        "gradwire_worker_compression_state_bytes",
        "Host memory of the per-chunk compression state (error-feedback "
        "residuals, their spare buffers, momentum velocities), bytes."},
       {&children->startup_bytes, "gradwire_worker_startup_bytes",
        "Bytes sent and received before step 0 (Init and the first pull)."},
       {&children->startup_seconds, "gradwire_worker_startup_seconds",
        "Seconds from the start of Register to the weights in place for "
        "step 0."},
       {&children->loss, "gradwire_worker_loss",
        "Training loss of the last step."},
       {&children->samples_per_second, "gradwire_worker_samples_per_second",
        "Training examples per second, over the last few seconds."},
       {&children->epoch, "gradwire_worker_epoch", "Current epoch, from 0."}});
}

WorkerMetrics::WorkerMetrics(std::unique_ptr<Children> children)
    : children_(std::move(children)) {}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::RecordTraffic(const TrafficStats& traffic) {
  Children& c = *children_;
  c.sent[0].Follow(traffic.init_bytes_sent);
  c.sent[1].Follow(traffic.push_bytes_sent);
  c.sent[2].Follow(traffic.pull_bytes_sent);
  c.received[0].Follow(traffic.init_bytes_received);
  c.received[1].Follow(traffic.push_bytes_received);
  c.received[2].Follow(traffic.pull_bytes_received);
  c.retries.Follow(traffic.retries);
}

void WorkerMetrics::SetStartup(uint64_t bytes, double seconds) {
  children_->startup_bytes->Set(static_cast<double>(bytes));
  children_->startup_seconds->Set(seconds);
}

void WorkerMetrics::RecordWire(const WireTotals& wire) {
  if (!wire.known) return;
  children_->wire_sent.Follow(wire.sent);
  children_->wire_received.Follow(wire.received);
}

void WorkerMetrics::AddDenseEquivalentBytes(uint64_t bytes) {
  children_->dense_equivalent->Increment(static_cast<double>(bytes));
}

void WorkerMetrics::RecordStep(const StepTimings& t, double residual_norm) {
  Children& c = *children_;
  c.steps->Increment();
  c.step_seconds->Observe(t.step);
  c.reduce_seconds->Observe(t.reduce);
  c.compress_seconds->Observe(t.compress);
  c.push_seconds->Observe(t.push);
  c.pull_seconds->Observe(t.pull);
  c.pull_wait_seconds->Observe(t.pull_wait);
  c.residual_norm->Set(residual_norm);
}

void WorkerMetrics::SetCompressionStateBytes(uint64_t bytes) {
  children_->compression_state_bytes->Set(static_cast<double>(bytes));
}

void WorkerMetrics::RecordCpu(const CpuTotals& totals) {
  for (int i = 0; i < kNumCpuActivities; ++i) {
    children_->cpu[i].Follow(totals.activity[i]);
  }
  children_->cpu[kNumCpuActivities].Follow(totals.other_threads);
  children_->cpu[kNumCpuActivities + 1].Follow(totals.compute);
}

void WorkerMetrics::SetLoss(double loss) { children_->loss->Set(loss); }

void WorkerMetrics::SetSamplesPerSecond(double samples_per_second) {
  children_->samples_per_second->Set(samples_per_second);
}

void WorkerMetrics::SetEpoch(int epoch) { children_->epoch->Set(epoch); }

uint64_t WorkerMetrics::SentBytes(const char* rpc) const {
  const int i = RpcIndex(rpc);
  return i < 0 ? 0 : static_cast<uint64_t>(children_->sent[i].counter->Value());
}

uint64_t WorkerMetrics::ReceivedBytes(const char* rpc) const {
  const int i = RpcIndex(rpc);
  return i < 0 ? 0
               : static_cast<uint64_t>(children_->received[i].counter->Value());
}

uint64_t WorkerMetrics::DenseEquivalentBytes() const {
  return static_cast<uint64_t>(children_->dense_equivalent->Value());
}

WireTotals WorkerMetrics::WireBytes() const {
  WireTotals wire;
  wire.known = children_->wire_sent.known();
  wire.sent = children_->wire_sent.Value();
  wire.received = children_->wire_received.Value();
  return wire;
}

}  // namespace gradwire
