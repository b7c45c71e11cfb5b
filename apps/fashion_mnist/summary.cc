// What a run reports: WeightsFingerprint and SummaryJson (trainer.h).
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apps/fashion_mnist/trainer.h"
#include "common/precision.h"
#include "common/usable_cpus.h"
#include "worker/sync_settings.h"

namespace gradwire {

std::string WeightsFingerprint(const ParameterSync::NamedTensors& tensors) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto mix = [&hash](const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    }
  };
  for (const auto& [name, tensor] : tensors) {
    mix(name.data(), name.size());
    const torch::Tensor values =
        tensor.detach().to(torch::kCPU, torch::kFloat).contiguous();
    for (const int64_t size : values.sizes()) mix(&size, sizeof(size));
    mix(values.data_ptr<float>(), values.numel() * sizeof(float));
  }
  return absl::StrFormat("%016x", hash);
}

namespace {

using Json = nlohmann::ordered_json;

// `value` rounded to 1/`per_unit` (1000: milliseconds), the precision the
// summary has always carried (and examples/python/train.py rounds to). Ties
// go to even, as Python's round() (an accuracy of 98/256 is 0.382812 in
// both). Not finite stays as it is, and is written as null.
double Rounded(double value, double per_unit) {
  return std::isfinite(value) ? std::nearbyint(value * per_unit) / per_unit
                              : value;
}

std::string ModeName(v1::ConsistencyMode mode) {
  switch (mode) {
    case v1::CONSISTENCY_MODE_ASP:
      return "asp";
    case v1::CONSISTENCY_MODE_SSP:
      return "ssp";
    default:
      return "bsp";
  }
}

// Never throws: text that is not valid UTF-8 is written with U+FFFD.
std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// What the run did: accuracy, steps, times, bytes and loss.
void AddRunFields(const TrainingResult& r, Json& summary) {
  // Without an evaluation the summary has no test_accuracy (not a made-up
  // number) and says so; gradwire local takes the cluster's accuracy from
  // worker 0.
  if (r.evaluated) summary["test_accuracy"] = Rounded(r.test_accuracy, 1e6);
  summary["evaluated"] = r.evaluated;
  summary["steps"] = r.steps;
  summary["resumed_at_step"] = r.resumed_at_step;
  summary["steps_run"] = r.sync.steps;
  summary["max_step_lead"] = r.sync.max_step_lead;
  summary["wall_seconds"] = Rounded(r.wall_seconds, 1e3);
  summary["train_seconds"] = Rounded(r.train_seconds, 1e3);
  summary["eval_seconds"] = Rounded(r.eval_seconds, 1e3);
  summary["pushed_bytes"] = r.sync.pushed_bytes;
  summary["pulled_bytes"] = r.sync.pulled_bytes;
  summary["dense_equivalent_bytes"] = r.sync.dense_equivalent_bytes;
  summary["init_bytes"] = r.sync.init_bytes;
  // Every RPC both ways, and the TCP bytes that carried them (null where
  // the transport cannot count them).
  const TrafficStats& p = r.payload;
  summary["payload_sent_bytes"] =
      p.init_bytes_sent + p.push_bytes_sent + p.pull_bytes_sent;
  summary["payload_received_bytes"] =
      p.init_bytes_received + p.push_bytes_received + p.pull_bytes_received;
  summary["wire_sent_bytes"] = r.wire.known ? Json(r.wire.sent) : Json(nullptr);
  summary["wire_received_bytes"] =
      r.wire.known ? Json(r.wire.received) : Json(nullptr);
  // The same plus every segment's IP and TCP headers (wire_totals.h).
  const bool packets = r.wire.known && r.wire.headers_known;
  summary["packet_sent_bytes"] =
      packets ? Json(r.wire.packet_sent()) : Json(nullptr);
  summary["packet_received_bytes"] =
      packets ? Json(r.wire.packet_received()) : Json(nullptr);
  // Start-up: what Register cost before step 0 (Init and the first pull).
  summary["startup_sent_bytes"] = r.sync.startup_bytes_sent;
  summary["startup_received_bytes"] = r.sync.startup_bytes_received;
  summary["startup_seconds"] = Rounded(r.sync.startup_seconds, 1e3);
  const WireTotals& startup_wire = r.sync.startup_wire;
  summary["startup_wire_sent_bytes"] =
      startup_wire.known ? Json(startup_wire.sent) : Json(nullptr);
  summary["startup_wire_received_bytes"] =
      startup_wire.known ? Json(startup_wire.received) : Json(nullptr);
  const bool startup_packets = startup_wire.known && startup_wire.headers_known;
  summary["startup_packet_sent_bytes"] =
      startup_packets ? Json(startup_wire.packet_sent()) : Json(nullptr);
  summary["startup_packet_received_bytes"] =
      startup_packets ? Json(startup_wire.packet_received()) : Json(nullptr);
  summary["retries"] = r.sync.retries;
  summary["final_loss"] = Rounded(r.final_loss, 1e6);
}

// How the run was set up: topology, compression and consistency.
void AddSettingFields(const TrainingResult& r, const SyncOptions& sync,
                      Json& summary) {
  summary["worker_id"] = sync.client.worker_id;
  summary["num_workers"] = sync.num_workers;
  summary["compressor"] = sync.compressor.name;
  summary["ratio"] = sync.compressor.ratio;
  summary["min_kept"] = sync.compressor.min_kept;
  summary["overlap"] = r.overlapped;
  summary["push_bucket_bytes"] = sync.push_bucket_bytes;
  summary["residual_spare"] = sync.residual_spare;
  summary["compress_threads"] =
      sync.compress_threads == 0 ? UsableCpus() : sync.compress_threads;
  summary["error_feedback"] = sync.error_feedback;
  summary["value_type"] = std::string(PrecisionName(sync.compressor.precision));
  summary["mode"] = ModeName(sync.training.mode());
  // What ran where (the line the worker logs at start): lets a report tell
  // runs with different optimizers apart.
  summary["optimizer"] = DescribeOptimizerPlacement(sync);
}

// Where the synchronisation's time went, and the weights it ended with.
void AddPhaseFields(const TrainingResult& r, Json& summary) {
  summary["compress_seconds"] = Rounded(r.sync.compress_seconds, 1e3);
  summary["push_seconds"] = Rounded(r.sync.push_seconds, 1e3);
  summary["pull_seconds"] = Rounded(r.sync.pull_seconds, 1e3);
  summary["pull_wait_seconds"] = Rounded(r.sync.pull_wait_seconds, 1e3);
  summary["pull_ahead"] = r.pulled_ahead;
  summary["reduce_seconds"] = Rounded(r.sync.reduce_seconds, 1e3);
  summary["weights_fingerprint"] = r.weights_fingerprint;
}

// The CPU account (worker/cpu_account.h): seconds since Register, to the
// microsecond, the communication's by activity against the compute's.
void AddCpuFields(const CpuTotals& cpu, Json& summary) {
  summary["cpu_steps"] = cpu.steps;
  summary["cpu_compute_seconds"] = Rounded(cpu.compute, 1e6);
  summary["cpu_communication_seconds"] = Rounded(cpu.communication(), 1e6);
  summary["cpu_communication_ratio"] =
      Rounded(cpu.compute > 0 ? cpu.communication() / cpu.compute : 0, 1e4);
  Json by_activity = Json::object();
  for (int a = 0; a < kNumCpuActivities; ++a) {
    by_activity[CpuActivityName(static_cast<CpuActivity>(a))] =
        Rounded(cpu.activity[a], 1e6);
  }
  by_activity["other_threads"] = Rounded(cpu.other_threads, 1e6);
  summary["cpu_seconds_by_activity"] = by_activity;
  summary["cpu_account_scopes"] = cpu.scopes;
}

// The loss and (when evaluated) the test accuracy of every epoch.
// Compressor "auto": its last choice per layer, the link rate it was made
// on, and the history `gradwire report` plots (AutoCompressionSummaryJson).
void AddAutoCompressionFields(const TrainingResult& r, Json& summary) {
  if (r.auto_compression.groups.empty()) return;
  const Json fields = Json::parse(
      AutoCompressionSummaryJson(r.auto_compression), nullptr, false);
  if (!fields.is_object()) return;
  for (const auto& member : fields.items()) {
    summary[member.key()] = member.value();
  }
}

void AddEpochFields(const TrainingResult& r, Json& summary) {
  Json losses = Json::array();
  for (double loss : r.epoch_loss) losses.push_back(Rounded(loss, 1e6));
  summary["epoch_loss"] = losses;
  if (r.evaluated) {
    Json accuracies = Json::array();
    for (double a : r.epoch_test_accuracy) {
      accuracies.push_back(Rounded(a, 1e6));
    }
    summary["epoch_test_accuracy"] = accuracies;
  }
}

// One line with a space after ':' and ',' (nlohmann's compact dump has
// none): line-based readers (bench/network/network.sh's awk, the sed of
// bench/*/*.sh and tests/cluster/) expect that layout.
std::string SpacedLine(const Json& summary) {
  std::string out = "{";
  for (const auto& member : summary.items()) {
    if (out.size() > 1) out += ", ";
    absl::StrAppend(&out, Dump(member.key()), ": ", Dump(member.value()));
  }
  return out + "}\n";
}

}  // namespace

std::string SummaryJson(const TrainingResult& r, const SyncOptions& sync) {
  Json summary = Json::object();
  AddRunFields(r, summary);
  AddSettingFields(r, sync, summary);
  AddPhaseFields(r, summary);
  AddCpuFields(r.cpu, summary);
  AddEpochFields(r, summary);
  AddAutoCompressionFields(r, summary);
  return SpacedLine(summary);
}

}  // namespace gradwire
