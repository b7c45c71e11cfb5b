// gradwire in your own libtorch training loop.
//
// A small classifier learns a synthetic task (which of 4 directions a point
// in 32 dimensions leans towards) while its weights live on gradwire shards:
// after backward(), ParameterSync::Step() compresses the gradients with Top-K
// and error feedback, pushes them, and writes the shards' new weights into
// the model. There is no local optimizer; the shards run it.
//
//   gradwire-server --port=7000 --num-workers=2 &
//   gradwire-example-custom-loop --shards=127.0.0.1:7000 --worker_id=0
//       --num_workers=2 &
//   gradwire-example-custom-loop --shards=127.0.0.1:7000 --worker_id=1
//       --num_workers=2
//
// Prints the loss as it trains and ends with "accuracy A" on held-out
// points (chance is 0.25). Exit code 0 on success, 1 when a shard fails,
// 2 for bad flags.
//
// It uses only gradwire's public header (gradwire/worker.h, CMake target
// gradwire::worker); custom_training_loop/CMakeLists.txt builds it against
// an installed gradwire (find_package(gradwire)).
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "gradwire/worker.h"

ABSL_FLAG(std::string, shards, "127.0.0.1:7000",
          "Comma-separated shard addresses, in shard-id order.");
ABSL_FLAG(int, worker_id, 0, "This worker's id in [0, --num_workers).");
ABSL_FLAG(int, num_workers, 1, "Number of workers.");
ABSL_FLAG(int, steps, 200, "Training steps.");

namespace {

constexpr int kInputs = 32;
constexpr int kClasses = 4;

// Points and their labels: the class whose fixed direction the point is
// closest to. The directions come from seed 0, so every worker learns the
// same task; `seed` only picks the points.
std::pair<torch::Tensor, torch::Tensor> SyntheticBatch(int64_t size,
                                                       uint64_t seed) {
  torch::manual_seed(0);
  const torch::Tensor directions = torch::randn({kInputs, kClasses});
  torch::manual_seed(seed);
  const torch::Tensor points = torch::randn({size, kInputs});
  return {points, points.matmul(directions).argmax(1)};
}

// 4. What it cost, and how well it learned: the bytes on the wire against
//    dense fp32, and the accuracy on held-out points.
void Report(torch::nn::Sequential& model, const gradwire::ParameterSync& sync) {
  torch::NoGradGuard no_grad;
  auto [points, labels] = SyntheticBatch(2000, /*seed=*/7);
  const double accuracy = model->forward(points)
                              .argmax(1)
                              .eq(labels)
                              .to(torch::kFloat)
                              .mean()
                              .item<double>();
  const gradwire::SyncStats& stats = sync.stats();
  std::printf("pushed %llu bytes (dense fp32: %llu), pulled %llu bytes\n",
              static_cast<unsigned long long>(stats.pushed_bytes),
              static_cast<unsigned long long>(stats.dense_equivalent_bytes),
              static_cast<unsigned long long>(stats.pulled_bytes));
  std::printf("accuracy %.4f\n", accuracy);
}

// The training loop; main() below only turns libtorch's exceptions into an
// exit code.
int Run() {
  const int worker_id = absl::GetFlag(FLAGS_worker_id);
  const int num_workers = absl::GetFlag(FLAGS_num_workers);
  const int steps = absl::GetFlag(FLAGS_steps);
  if (num_workers < 1 || worker_id < 0 || worker_id >= num_workers ||
      steps < 1) {
    std::fprintf(stderr,
                 "need 0 <= --worker_id < --num_workers and --steps >= 1\n");
    return 2;
  }

  // 1. Say where the shards are and how to compress.
  gradwire::SyncOptions options;
  options.shard_addresses = absl::StrSplit(absl::GetFlag(FLAGS_shards), ',');
  options.client.worker_id = worker_id;
  options.num_workers = num_workers;
  options.compressor.name = "topk";
  options.compressor.ratio = 0.01;
  options.training.mutable_optimizer()->set_learning_rate(0.1);
  auto sync = gradwire::ParameterSync::Connect(options);
  if (!sync.ok()) {
    std::fprintf(stderr, "connect: %s\n", sync.status().ToString().c_str());
    return 1;
  }

  // 2. Register the parameters: the shards keep the first worker's initial
  //    values, and every worker starts from them.
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(kInputs, 256),
                              torch::nn::ReLU(),
                              torch::nn::Linear(256, kClasses));
  if (absl::Status s = (*sync)->Register(model->named_parameters()); !s.ok()) {
    std::fprintf(stderr, "register: %s\n", s.ToString().c_str());
    return 1;
  }

  // 3. Train: backward(), then Step() instead of optimizer.step().
  for (int step = 0; step < steps; ++step) {
    auto [points, labels] =
        SyntheticBatch(64, 1000 + step * num_workers + worker_id);
    model->zero_grad();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(model->forward(points), labels);
    loss.backward();
    if (absl::Status s = (*sync)->Step(); !s.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, s.ToString().c_str());
      return 1;
    }
    if (step % 50 == 0 || step == steps - 1) {
      std::printf("step %d loss %.4f\n", step, loss.item<float>());
    }
  }

  Report(model, **sync);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  try {
    return Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
