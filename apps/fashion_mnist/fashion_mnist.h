// Fashion-MNIST for the worker: reads the gzip IDX files of the
// `dataset-fashion-mnist` package into normalized tensors, splits a data set
// among workers, and orders each epoch's batches reproducibly.
//
// This header exposes torch types; include it only from trainer code, never
// from headers that common/ or server/ see.
#ifndef GRADWIRE_APPS_FASHION_MNIST_FASHION_MNIST_H_
#define GRADWIRE_APPS_FASHION_MNIST_FASHION_MNIST_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradwire {

// Where the Debian package `dataset-fashion-mnist` installs the files.
inline constexpr char kFashionMnistDefaultDir[] =
    "/usr/share/datasets/fashion-mnist";

// Per-pixel statistics of the training set (pixels scaled to [0, 1]).
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

inline constexpr int64_t kFashionMnistRows = 28;
inline constexpr int64_t kFashionMnistCols = 28;
inline constexpr int64_t kFashionMnistClasses = 10;

// A labelled image set held in memory (CPU tensors).
struct Dataset {
  // [N, 1, 28, 28] float32, normalized: (pixel / 255 - kFashionMnistMean) /
  // kFashionMnistStd.
  torch::Tensor images;
  // [N] int64, class ids in [0, 10).
  torch::Tensor labels;

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Loads the training set (train-{images-idx3,labels-idx1}-ubyte.gz, 60000
// examples) or the test set (t10k-*, 10000 examples) from `dir`, in file
// order. `limit` >= 0 keeps only the first `limit` examples (and reads only
// those from disk); -1 keeps all.
//
// Errors (never throws):
//   NOT_FOUND        `dir` or one of its two files is missing; the message
//                    says how to install the package (apt-get install
//                    dataset-fashion-mnist, or scripts/install-deps.sh) or to
//                    pass --data-dir.
//   DATA_LOSS        a file is not valid gzip, is truncated, has the wrong
//                    IDX magic (0x00000803 images, 0x00000801 labels), images
//                    that are not 28x28, a label outside [0, 10), or trailing
//                    bytes.
//   FAILED_PRECONDITION  image and label files disagree on the count.
//   INVALID_ARGUMENT `limit` < -1.
// Every message names the file it is about.
//
// Thread safety: safe to call concurrently (no shared state).
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, bool train,
                                         int64_t limit = -1);

// Worker `worker_id`'s part of `data` when it is split among `num_workers`
// workers: the examples whose index i satisfies i % num_workers == worker_id,
// in index order (strided, so every shard sees every region of the file and
// sizes differ by at most one). The shards of workers 0..num_workers-1 are
// disjoint and together are exactly `data`. The result is a copy.
//
// Precondition: 0 <= worker_id < num_workers; otherwise throws c10::Error
// (a programming error; flag parsing should have caught it).
Dataset ShardDataset(const Dataset& data, uint32_t worker_id,
                     uint32_t num_workers);

// The order in which one epoch visits a data set of `num_examples` examples,
// cut into batches of `batch_size` (the last batch is smaller unless
// `drop_last`). Each epoch is a fresh permutation that depends only on
// (seed, epoch): the same on every machine, compiler and libtorch version
// (it uses its own SplitMix64-seeded std::mt19937_64 and Fisher-Yates
// shuffle, not std::shuffle or torch's generator, whose outputs are
// implementation-defined).
//
// Usage:
//   BatchOrder order(data.size(), 64, seed);
//   for (const torch::Tensor& idx : order.Batches(epoch)) {
//     auto x = data.images.index_select(0, idx);
//     auto y = data.labels.index_select(0, idx);
//     ...
//   }
//
// Thread safety: immutable after construction; const methods may be called
// concurrently.
class BatchOrder {
 public:
  // Preconditions: num_examples >= 0, batch_size >= 1; otherwise throws
  // c10::Error.
  BatchOrder(int64_t num_examples, int64_t batch_size, uint64_t seed,
             bool drop_last = false);

  int64_t num_examples() const { return num_examples_; }
  int64_t batch_size() const { return batch_size_; }
  // Batches per epoch: ceil(num_examples / batch_size), or floor when
  // drop_last.
  int64_t num_batches() const;

  // The permutation of [0, num_examples) for `epoch`: [num_examples] int64.
  torch::Tensor Permutation(uint64_t epoch) const;

  // The epoch's batches, num_batches() 1-D int64 index tensors in visiting
  // order (views into one permutation).
  std::vector<torch::Tensor> Batches(uint64_t epoch) const;

 private:
  int64_t num_examples_;
  int64_t batch_size_;
  uint64_t seed_;
  bool drop_last_;
};

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_FASHION_MNIST_H_
