#include "worker/trainer.h"

#include <torch/nn/functional/loss.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"
#include "worker/progress.h"
#include "worker/worker_metrics.h"

namespace gradwire {
namespace {

// Fraction of `data` that `model` classifies correctly.
double Accuracy(Classifier& model, const Dataset& data) {
  torch::NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  const int64_t batch = 1000;
  for (int64_t start = 0; start < data.size(); start += batch) {
    const int64_t end = std::min(start + batch, data.size());
    const torch::Tensor logits =
        model.forward(data.images.slice(0, start, end));
    correct += logits.argmax(1)
                   .eq(data.labels.slice(0, start, end))
                   .sum()
                   .item<int64_t>();
  }
  model.train();
  return data.size() == 0 ? 0.0 : static_cast<double>(correct) / data.size();
}

// The data are cut into one part per process: worker w's local rank r
// trains on part w * local_size + r, so the ranks of a node see different
// examples and their reduced gradient covers a node's share.
uint32_t DataPart(const SyncOptions& sync) {
  return sync.worker_id * sync.local_size + sync.local_rank;
}
uint32_t DataParts(const SyncOptions& sync) {
  return sync.num_workers * sync.local_size;
}

struct TrainingData {
  Dataset train;  // This process's part.
  Dataset test;
  // Equal on every worker, so that BSP steps line up.
  int64_t steps_per_epoch = 0;
};

absl::StatusOr<TrainingData> LoadData(const TrainerOptions& options,
                                      const SyncOptions& sync) {
  auto train =
      LoadFashionMnist(options.data_dir, /*train=*/true,
                       options.train_limit > 0 ? options.train_limit : -1);
  if (!train.ok()) return train.status();
  auto test =
      LoadFashionMnist(options.data_dir, /*train=*/false,
                       options.test_limit > 0 ? options.test_limit : -1);
  if (!test.ok()) return test.status();
  TrainingData data;
  const int64_t total = train->size();
  data.train = ShardDataset(*train, DataPart(sync), DataParts(sync));
  data.test = std::move(*test);
  // The smallest part decides the step count of everyone.
  data.steps_per_epoch = (total / DataParts(sync)) / options.batch_size;
  if (data.steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d training examples over %d processes do not fill one batch of %d",
        total, DataParts(sync), options.batch_size));
  }
  return data;
}

}  // namespace

absl::StatusOr<TrainingResult> Train(const TrainerOptions& options,
                                     const SyncOptions& sync_options,
                                     ParameterSync* sync) {
  try {
    auto data = LoadData(options, sync_options);
    if (!data.ok()) return data.status();
    torch::manual_seed(options.seed);
    auto model = MakeModel(options.model);
    if (!model.ok()) return model.status();
    if (absl::Status s = sync->Register((*model)->named_parameters());
        !s.ok()) {
      return s;
    }
    Progress progress(options.label, options.interactive);
    TrainingResult result;
    result.resumed_at_step = sync->step();
    if (sync->step() > 0 && !options.quiet) {
      progress.Line(absl::StrFormat("resuming at step %d", sync->step()));
    }
    const BatchOrder order(data->train.size(), options.batch_size,
                           options.seed + DataPart(sync_options),
                           /*drop_last=*/true);
    const uint64_t total_steps =
        options.max_steps > 0
            ? std::min<uint64_t>(options.max_steps,
                                 data->steps_per_epoch * options.epochs)
            : data->steps_per_epoch * options.epochs;
    const absl::Time start = absl::Now();
    absl::Time window_start = start;
    uint64_t window_samples = 0;
    for (int epoch = 0; epoch < options.epochs && sync->step() < total_steps;
         ++epoch) {
      const std::vector<torch::Tensor> batches = order.Batches(epoch);
      const uint64_t first = epoch * data->steps_per_epoch;
      for (int64_t b = 0;
           b < data->steps_per_epoch && sync->step() < total_steps; ++b) {
        if (first + b < sync->step()) continue;  // Resumed past this batch.
        const torch::Tensor& index = batches[b];
        (*model)->zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            (*model)->forward(data->train.images.index_select(0, index)),
            data->train.labels.index_select(0, index));
        loss.backward();
        if (options.step_delay > absl::ZeroDuration() &&
            sync->step() % options.step_delay_every == 0) {
          absl::SleepFor(options.step_delay);
        }
        if (absl::Status s = sync->Step(epoch); !s.ok()) return s;
        result.final_loss = loss.item<double>();
        window_samples += index.size(0);
        const double seconds =
            absl::ToDoubleSeconds(absl::Now() - window_start);
        ProgressSample sample;
        sample.epoch = epoch;
        sample.epochs = options.epochs;
        sample.step_in_epoch = b + 1;
        sample.steps_per_epoch = data->steps_per_epoch;
        sample.global_step = sync->step();
        sample.loss = result.final_loss;
        sample.samples_per_second = seconds > 0 ? window_samples / seconds : 0;
        sample.pushed_bytes = sync->stats().pushed_bytes;
        sample.dense_equivalent_bytes = sync->stats().dense_equivalent_bytes;
        if (!options.quiet) progress.Update(sample);
        if (WorkerMetrics* m = sync->metrics()) {
          m->SetLoss(result.final_loss);
          m->SetSamplesPerSecond(sample.samples_per_second);
          m->SetEpoch(epoch);
        }
        if (seconds > 10) {
          window_start = absl::Now();
          window_samples = 0;
        }
      }
      if (options.evaluate) {
        result.test_accuracy = Accuracy(**model, data->test);
        result.evaluated = true;
        if (!options.quiet) {
          progress.Line(absl::StrFormat("epoch %d test accuracy %.4f",
                                        epoch + 1, result.test_accuracy));
        }
      }
    }
    if (options.evaluate && !result.evaluated) {
      result.test_accuracy = Accuracy(**model, data->test);
      result.evaluated = true;
    }
    result.weights_fingerprint =
        WeightsFingerprint((*model)->named_parameters().pairs());
    result.steps = sync->step();
    result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    result.sync = sync->stats();
    if (const WorkerMetrics* m = sync->metrics()) {
      // The summary reports what the dashboards show: the same counters.
      result.sync.pushed_bytes = m->SentBytes("push");
      result.sync.pulled_bytes = m->ReceivedBytes("pull");
      result.sync.init_bytes = m->SentBytes("init");
      result.sync.dense_equivalent_bytes = m->DenseEquivalentBytes();
    }
    return result;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrFormat("training failed: %s", e.what()));
  }
}

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

std::string SummaryJson(const TrainingResult& r, const SyncOptions& sync) {
  // Without an evaluation the summary has no test_accuracy (not a made-up
  // number); gradwire local takes the cluster's accuracy from worker 0.
  const std::string accuracy =
      r.evaluated
          ? absl::StrFormat("\"test_accuracy\": %.6f, ", r.test_accuracy)
          : std::string();
  return absl::StrFormat(
      "{%s\"steps\": %d, \"resumed_at_step\": %d, \"steps_run\": %d, "
      "\"max_step_lead\": %d, \"wall_seconds\": %.3f, "
      "\"pushed_bytes\": %d, \"pulled_bytes\": %d, "
      "\"dense_equivalent_bytes\": %d, \"init_bytes\": %d, \"retries\": %d, "
      "\"final_loss\": %.6f, \"worker_id\": %d, \"num_workers\": %d, "
      "\"compressor\": \"%s\", \"ratio\": %g, \"error_feedback\": %s, "
      "\"compress_seconds\": %.3f, \"push_seconds\": %.3f, "
      "\"pull_seconds\": %.3f, \"reduce_seconds\": %.3f, "
      "\"weights_fingerprint\": \"%s\"}\n",
      accuracy, r.steps, r.resumed_at_step, r.sync.steps, r.sync.max_step_lead,
      r.wall_seconds, r.sync.pushed_bytes, r.sync.pulled_bytes,
      r.sync.dense_equivalent_bytes, r.sync.init_bytes, r.sync.retries,
      r.final_loss, sync.worker_id, sync.num_workers, sync.compressor.name,
      sync.compressor.ratio, sync.error_feedback ? "true" : "false",
      r.sync.compress_seconds, r.sync.push_seconds, r.sync.pull_seconds,
      r.sync.reduce_seconds, r.weights_fingerprint);
}

}  // namespace gradwire
