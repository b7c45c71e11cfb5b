// The Fashion-MNIST trainer behind gradwire-worker: loads this worker's part
// of the data, builds the model, and trains it through ParameterSync, with
// progress on the terminal and test accuracy at the end of every epoch
// (evaluation.h). WeightsFingerprint and SummaryJson are in summary.cc.
#ifndef GRADWIRE_APPS_FASHION_MNIST_TRAINER_H_
#define GRADWIRE_APPS_FASHION_MNIST_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/parameter_sync.h"

namespace gradwire {

struct TrainerOptions {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string model = "cnn";
  int epochs = 1;
  int64_t batch_size = 64;
  // Stop after this many steps in all (0: no limit).
  uint64_t max_steps = 0;
  // Use only the first N training / test examples (0: all).
  int64_t train_limit = 0;
  int64_t test_limit = 0;
  // Seeds model initialisation and batch order: the same seed and worker
  // count give the same run.
  uint64_t seed = 1;
  // Label of progress lines, and whether to draw a live bar.
  std::string label = "worker 0";
  bool interactive = false;
  // Only local rank 0 of a node prints progress.
  bool quiet = false;
  // Measure test accuracy at the end of every epoch. In BSP every worker
  // holds the same weights, so one evaluating worker is enough.
  bool evaluate = true;
  // Push each parameter's gradient as soon as backward() has finished it
  // (worker/gradient_hooks.h), so that communication overlaps the rest of the
  // backward pass; only with one local rank (a node's ranks reduce whole
  // steps). The weights are the same either way.
  bool overlap = true;
  // Test images per forward pass of an evaluation. Small enough that the
  // CNN's largest activation (batch x 100 KB) stays below glibc's mmap
  // threshold and in cache: 100 took 1.8 s for the 10,000 test images on 2
  // cores where 1000 took 10.9 s, every batch of 1000 mapping and faulting
  // in its activations afresh.
  int64_t eval_batch_size = 100;
  // Compute-only runs (Train with no ParameterSync): the local optimizer's
  // learning rate and momentum (torch::optim::SGD).
  double local_lr = 0.05;
  double local_momentum = 0.9;
  // Fault injection (tests, benchmarks): sleep `step_delay` before pushing
  // every `step_delay_every`-th step, which makes this worker a straggler.
  absl::Duration step_delay = absl::ZeroDuration();
  int64_t step_delay_every = 1;
};

struct TrainingResult {
  // Whether gradients were pushed during backward() (TrainerOptions::overlap).
  bool overlapped = false;
  // Whether pulls ran ahead, each layer waiting for its own weights
  // (SyncOptions::pull_ahead, worker/layer_gate.h).
  bool pulled_ahead = false;
  // Valid when evaluated (TrainerOptions::evaluate).
  bool evaluated = false;
  double test_accuracy = 0;
  uint64_t steps = 0;
  // The step Register resumed at (0 unless the shards had seen this worker
  // before: a restart, or a rejoin after it was dropped).
  uint64_t resumed_at_step = 0;
  // From the first step to the end: training plus evaluation.
  double wall_seconds = 0;
  double train_seconds = 0;
  double eval_seconds = 0;
  double final_loss = 0;
  // Per epoch trained: the mean training loss of this worker's steps, and
  // (when evaluated) the test accuracy at the epoch's end. An epoch that
  // ran no step here (resumed past it) has no entry.
  std::vector<double> epoch_loss;
  std::vector<double> epoch_test_accuracy;
  // WeightsFingerprint of the model at the end.
  std::string weights_fingerprint;
  SyncStats sync;
  // Compressor "auto"'s choices, step by step (no groups otherwise).
  AutoCompressionReport auto_compression;
  // The client's payload (serialized messages of every RPC, both ways) and
  // the TCP bytes the kernel counted on its connections (unknown where it
  // cannot: ParameterSync::WireBytes()).
  TrafficStats payload;
  WireTotals wire;
  // The worker's CPU by activity, against its compute
  // (ParameterSync::cpu_account()).
  CpuTotals cpu;
};

// A 64-bit FNV-1a hash of the tensors' names, shapes and float32 bytes, as
// 16 hex digits: equal fingerprints mean bit-identical weights (replicas
// that agree, or a run that reproduced).
std::string WeightsFingerprint(const ParameterSync::NamedTensors& tensors);

// Trains with `sync` (connected, not yet registered). Returns the result, or
// the first error (data set missing, shard unreachable, ...). With `sync`
// null the run is compute only: the same data, model and steps, each step
// a local torch::optim::SGD step, nothing on the network (the reference
// that shows what synchronisation costs).
absl::StatusOr<TrainingResult> Train(const TrainerOptions& options,
                                     const SyncOptions& sync_options,
                                     ParameterSync* sync);

// {"test_accuracy", "steps", "wall_seconds", "pushed_bytes", "pulled_bytes",
//  "dense_equivalent_bytes", ..., "epoch_loss": [...],
//  "epoch_test_accuracy": [...]} as one JSON object on one line, with a
// space after every ':' and ',' (line-based readers such as bench/*/*.sh rely
// on that), and a newline. No test_accuracy when not evaluated; seconds to
// the millisecond, accuracy and loss to 1e-6; a loss that is not finite is
// null.
std::string SummaryJson(const TrainingResult& result,
                        const SyncOptions& sync_options);

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_TRAINER_H_
