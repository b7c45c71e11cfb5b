#include "apps/fashion_mnist/trainer.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "apps/fashion_mnist/evaluation.h"
#include "apps/fashion_mnist/fashion_mnist.h"
#include "apps/fashion_mnist/models.h"
#include "apps/fashion_mnist/progress.h"
#include "worker/gradient_hooks.h"
#include "worker/layer_gate.h"
#include "worker/worker_metrics.h"

namespace gradwire {
namespace {

// The data are cut into one part per process: worker w's local rank r
// trains on part w * local_size + r, so the ranks of a node see different
// examples and their reduced gradient covers a node's share.
uint32_t DataPart(const SyncOptions& sync) {
  return sync.client.worker_id * sync.local.size + sync.local.rank;
}
uint32_t DataParts(const SyncOptions& sync) {
  return sync.num_workers * sync.local.size;
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

// Examples per second over a window of at most ~10 s, so that the figure
// follows the current pace rather than the run's average.
class Throughput {
 public:
  // Adds `samples` just trained; returns the rate over the window.
  double Add(int64_t samples) {
    window_samples_ += samples;
    const double seconds = absl::ToDoubleSeconds(absl::Now() - window_start_);
    const double rate = seconds > 0 ? window_samples_ / seconds : 0;
    if (seconds > 10) {
      window_start_ = absl::Now();
      window_samples_ = 0;
    }
    return rate;
  }

 private:
  absl::Time window_start_ = absl::Now();
  uint64_t window_samples_ = 0;
};

// One run of Train on registered parameters: the loop over epochs and
// batches, with progress, gauges and evaluation along the way.
class TrainingRun {
 public:
  // `hooks`: set when gradients are announced during backward().
  TrainingRun(const TrainerOptions& options, const SyncOptions& sync_options,
              const TrainingData& data, Classifier& model, ParameterSync* sync,
              GradientHooks* hooks, LayerGate* gate)
      : options_(options),
        sync_options_(sync_options),
        data_(data),
        model_(model),
        sync_(sync),
        hooks_(hooks),
        gate_(gate),
        progress_(options.label, options.interactive) {
    if (sync_ == nullptr) {
      // Compute only: the same steps, a local optimizer, no network.
      local_ = std::make_unique<torch::optim::SGD>(
          model_.parameters(), torch::optim::SGDOptions(options.local_lr)
                                   .momentum(options.local_momentum));
    }
  }

  // Trains to the end of the run (or the first error) and sums it up.
  absl::StatusOr<TrainingResult> Run();

 private:
  // The steps of the whole run: every epoch's, or --max-steps if fewer.
  uint64_t TotalSteps() const;
  // Steps done: the synchronised ones, or the local ones in compute-only
  // runs.
  uint64_t StepsDone() const {
    return local_ != nullptr ? local_steps_ : sync_->step();
  }
  // Test accuracy now, its time added to result_.eval_seconds.
  double Evaluate();
  // Trains epoch `epoch` until its end or step `total_steps`, skipping the
  // batches a resumed worker has done.
  absl::Status TrainEpoch(const BatchOrder& order, int epoch,
                          uint64_t total_steps);
  // One step on the batch `index`: forward, backward, the straggler delay
  // if any, and the synchronisation. Returns the batch's loss.
  absl::StatusOr<double> TrainStep(const torch::Tensor& index, int epoch);
  // The progress line and the training gauges after a step.
  void ReportStep(const ProgressSample& sample);
  // The end of a run: the weights' fingerprint, the counts, and the byte
  // counts as the dashboards show them.
  void Finish(absl::Time start);

  const TrainerOptions& options_;
  const SyncOptions& sync_options_;
  const TrainingData& data_;
  Classifier& model_;
  // Null in compute-only runs, which step `local_` instead.
  ParameterSync* const sync_;
  std::unique_ptr<torch::optim::SGD> local_;
  GradientHooks* const hooks_;
  // Set when each layer waits for its own pulled weights.
  LayerGate* const gate_;
  uint64_t local_steps_ = 0;
  Progress progress_;
  Throughput throughput_;
  TrainingResult result_;
};

absl::StatusOr<TrainingResult> TrainingRun::Run() {
  result_.resumed_at_step = StepsDone();
  result_.overlapped = hooks_ != nullptr;
  result_.pulled_ahead = gate_ != nullptr;
  if (StepsDone() > 0 && !options_.quiet) {
    progress_.Line(absl::StrFormat("resuming at step %d", StepsDone()));
  }
  const BatchOrder order(data_.train.size(), options_.batch_size,
                         options_.seed + DataPart(sync_options_),
                         /*drop_last=*/true);
  const uint64_t total_steps = TotalSteps();
  const absl::Time start = absl::Now();
  for (int epoch = 0; epoch < options_.epochs && StepsDone() < total_steps;
       ++epoch) {
    if (absl::Status s = TrainEpoch(order, epoch, total_steps); !s.ok()) {
      return s;
    }
    // Evaluation and the summary read every weight: the last step's pulls
    // land first.
    if (sync_ != nullptr) {
      if (absl::Status s = sync_->AwaitWeights(); !s.ok()) return s;
    }
    if (options_.evaluate) {
      result_.test_accuracy = Evaluate();
      result_.evaluated = true;
      result_.epoch_test_accuracy.push_back(result_.test_accuracy);
      if (!options_.quiet) {
        progress_.Line(absl::StrFormat("epoch %d test accuracy %.4f", epoch + 1,
                                       result_.test_accuracy));
      }
    }
  }
  if (options_.evaluate && !result_.evaluated) {
    result_.test_accuracy = Evaluate();
    result_.evaluated = true;
  }
  Finish(start);
  return result_;
}

double TrainingRun::Evaluate() {
  const absl::Time start = absl::Now();
  const double accuracy =
      Accuracy(model_, data_.test, options_.eval_batch_size);
  result_.eval_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  return accuracy;
}

uint64_t TrainingRun::TotalSteps() const {
  const uint64_t all = data_.steps_per_epoch * options_.epochs;
  return options_.max_steps > 0 ? std::min<uint64_t>(options_.max_steps, all)
                                : all;
}

absl::Status TrainingRun::TrainEpoch(const BatchOrder& order, int epoch,
                                     uint64_t total_steps) {
  const std::vector<torch::Tensor> batches = order.Batches(epoch);
  const uint64_t first = epoch * data_.steps_per_epoch;
  double loss_sum = 0;
  int64_t losses = 0;
  for (int64_t b = 0; b < data_.steps_per_epoch && StepsDone() < total_steps;
       ++b) {
    if (first + b < StepsDone()) continue;  // Resumed past this batch.
    absl::StatusOr<double> loss = TrainStep(batches[b], epoch);
    if (!loss.ok()) return loss.status();
    result_.final_loss = *loss;
    loss_sum += *loss;
    ++losses;
    ProgressSample sample;
    sample.epoch = epoch;
    sample.epochs = options_.epochs;
    sample.step_in_epoch = b + 1;
    sample.steps_per_epoch = data_.steps_per_epoch;
    sample.global_step = StepsDone();
    sample.loss = *loss;
    sample.samples_per_second = throughput_.Add(batches[b].size(0));
    if (sync_ != nullptr) {
      sample.pushed_bytes = sync_->stats().pushed_bytes;
      sample.dense_equivalent_bytes = sync_->stats().dense_equivalent_bytes;
    }
    ReportStep(sample);
  }
  if (losses > 0) result_.epoch_loss.push_back(loss_sum / losses);
  return absl::OkStatus();
}

absl::StatusOr<double> TrainingRun::TrainStep(const torch::Tensor& index,
                                              int epoch) {
  model_.zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      model_.forward(data_.train.images.index_select(0, index)),
      data_.train.labels.index_select(0, index));
  if (gate_ != nullptr) {
    if (absl::Status s = gate_->TakeError(); !s.ok()) return s;
  }
  if (hooks_ != nullptr) hooks_->set_epoch(epoch);
  loss.backward();
  if (hooks_ != nullptr) {
    if (absl::Status s = hooks_->TakeError(); !s.ok()) return s;
    if (absl::Status s = hooks_->FinishStep(); !s.ok()) return s;
  }
  if (options_.step_delay > absl::ZeroDuration() &&
      StepsDone() % options_.step_delay_every == 0) {
    absl::SleepFor(options_.step_delay);
  }
  if (local_ != nullptr) {
    local_->step();
    ++local_steps_;
  } else if (absl::Status s = sync_->Step(epoch); !s.ok()) {
    return s;
  }
  return loss.item<double>();
}

void TrainingRun::ReportStep(const ProgressSample& sample) {
  if (!options_.quiet) progress_.Update(sample);
  if (WorkerMetrics* m = sync_ != nullptr ? sync_->metrics() : nullptr) {
    m->SetLoss(sample.loss);
    m->SetSamplesPerSecond(sample.samples_per_second);
    m->SetEpoch(sample.epoch);
  }
}

void TrainingRun::Finish(absl::Time start) {
  result_.weights_fingerprint =
      WeightsFingerprint(model_.named_parameters().pairs());
  result_.steps = StepsDone();
  result_.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result_.train_seconds = result_.wall_seconds - result_.eval_seconds;
  if (sync_ == nullptr) return;
  result_.sync = sync_->stats();
  if (const AutoCompressionReport* chosen = sync_->auto_compression()) {
    result_.auto_compression = *chosen;
  }
  result_.payload = sync_->Traffic();
  result_.wire = sync_->WireBytes();
  result_.cpu = sync_->cpu_account().Totals();
  if (const WorkerMetrics* m = sync_->metrics()) {
    // The summary reports what the dashboards show: the same counters.
    result_.sync.pushed_bytes = m->SentBytes("push");
    result_.sync.pulled_bytes = m->ReceivedBytes("pull");
    result_.sync.init_bytes = m->SentBytes("init");
    result_.sync.dense_equivalent_bytes = m->DenseEquivalentBytes();
  }
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
    if (sync != nullptr) {
      if (absl::Status s = sync->Register((*model)->named_parameters());
          !s.ok()) {
        return s;
      }
    }
    std::unique_ptr<GradientHooks> hooks;
    if (sync != nullptr && options.overlap && sync_options.local.size == 1) {
      hooks = std::make_unique<GradientHooks>((*model)->parameters(), sync);
    }
    std::unique_ptr<LayerGate> gate;
    if (hooks != nullptr && sync_options.pull_ahead) {
      gate = std::make_unique<LayerGate>((*model)->parameters(), sync);
      (*model)->set_layer_hook(
          [gate = gate.get()](const torch::nn::Module& layer) {
            gate->BeforeLayer(layer);
          });
    }
    absl::StatusOr<TrainingResult> result =
        TrainingRun(options, sync_options, *data, **model, sync, hooks.get(),
                    gate.get())
            .Run();
    (*model)->set_layer_hook(nullptr);
    return result;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrFormat("training failed: %s", e.what()));
  }
}

}  // namespace gradwire
