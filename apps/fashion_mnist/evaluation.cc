#include "apps/fashion_mnist/evaluation.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "common/usable_cpus.h"

namespace gradwire {
namespace {

// Examples of data[start, end) that `model` classifies correctly, in
// batches of `batch`, without autograd (the guard is per thread).
int64_t CountCorrect(Classifier& model, const Dataset& data, int64_t start,
                     int64_t end, int64_t batch) {
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t first = start; first < end; first += batch) {
    const int64_t last = std::min(first + batch, end);
    const torch::Tensor logits =
        model.forward(data.images.slice(0, first, last));
    correct += logits.argmax(1)
                   .eq(data.labels.slice(0, first, last))
                   .sum()
                   .item<int64_t>();
  }
  return correct;
}

}  // namespace

// One thread per core, each on its own slice of the data with one
// intra-op thread. Splitting the examples scales with the cores where
// torch's intra-op threads do not (the CNN's forward pass runs no faster
// at 2 intra-op threads than at 1 here, and 2x faster on 2 slices). An
// evaluation runs while training waits (at an epoch's end every BSP worker
// waits for the one that evaluates; at the run's end the others are done),
// so the cores the other workers trained on are free.
double Accuracy(Classifier& model, const Dataset& data, int64_t batch) {
  const int64_t size = data.size();
  if (size == 0) return 0.0;
  const int64_t threads =
      std::clamp<int64_t>(UsableCpus(), 1, (size + batch - 1) / batch);
  const int saved_threads = at::get_num_threads();
  at::set_num_threads(1);
  model.eval();
  std::vector<int64_t> correct(threads, 0);
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  for (int64_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        correct[t] = CountCorrect(model, data, size * t / threads,
                                  size * (t + 1) / threads, batch);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  model.train();
  at::set_num_threads(saved_threads);
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  int64_t total = 0;
  for (int64_t c : correct) total += c;
  return static_cast<double>(total) / size;
}

}  // namespace gradwire
