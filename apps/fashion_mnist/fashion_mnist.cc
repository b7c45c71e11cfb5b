#include "apps/fashion_mnist/fashion_mnist.h"

#include <sys/mman.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradwire {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
// Fashion-MNIST has 70000 examples; a larger count means a corrupt header,
// and refusing it keeps a bad file from triggering a huge allocation.
constexpr uint32_t kMaxExamples = 1000000;
constexpr int64_t kPixels = kFashionMnistRows * kFashionMnistCols;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::string InstallHint() {
  return "install it with `apt-get install dataset-fashion-mnist` (or "
         "scripts/install-deps.sh), or pass --data-dir";
}

absl::Status CheckPresent(const std::string& dir, const std::string& images,
                          const std::string& labels) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("Fashion-MNIST not found in ", dir, ": ", InstallHint()));
  }
  for (const std::string& path : {images, labels}) {
    if (!std::filesystem::is_regular_file(path, ec)) {
      return absl::NotFoundError(absl::StrCat("Fashion-MNIST file ", path,
                                              " is missing: ", InstallHint()));
    }
  }
  return absl::OkStatus();
}

absl::Status GzError(gzFile_s* file, const std::string& path,
                     const std::string& what) {
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (code == Z_OK || code == Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  }
  return absl::DataLossError(
      absl::StrCat(path, ": ", what, " (zlib: ", message ? message : "?", ")"));
}

// Reads exactly `size` decompressed bytes (size <= INT_MAX) of `what`.
absl::Status ReadExact(gzFile_s* file, const std::string& path, void* dst,
                       size_t size, const std::string& what) {
  const int got = gzread(file, dst, static_cast<unsigned>(size));
  if (got < 0 || static_cast<size_t>(got) != size) {
    return GzError(file, path,
                   absl::StrFormat("truncated: read %d of the %d bytes of %s",
                                   std::max(got, 0), size, what));
  }
  return absl::OkStatus();
}

absl::Status ExpectEnd(gzFile_s* file, const std::string& path) {
  unsigned char extra;
  const int got = gzread(file, &extra, 1);
  if (got < 0) return GzError(file, path, "corrupt after the last example");
  if (got > 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": trailing bytes after the last example"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GzFile> Open(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  gzbuffer(file.get(), 1 << 18);
  return file;
}

// Reads an IDX header: the magic number, then `dims` big-endian counts.
absl::StatusOr<std::vector<uint32_t>> ReadHeader(gzFile_s* file,
                                                 const std::string& path,
                                                 uint32_t magic, int dims) {
  std::vector<unsigned char> bytes(4 * (1 + dims));
  if (absl::Status s =
          ReadExact(file, path, bytes.data(), bytes.size(), "the IDX header");
      !s.ok()) {
    return s;
  }
  std::vector<uint32_t> words(1 + dims);
  for (size_t i = 0; i < words.size(); ++i) {
    const unsigned char* b = &bytes[4 * i];
    words[i] = uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 |
               uint32_t{b[2]} << 8 | uint32_t{b[3]};
  }
  if (words[0] != magic) {
    return absl::DataLossError(absl::StrFormat(
        "%s: IDX magic number is 0x%08x, expected 0x%08x (%s file)", path,
        words[0], magic, magic == kImagesMagic ? "an images" : "a labels"));
  }
  if (words[1] > kMaxExamples) {
    return absl::DataLossError(
        absl::StrFormat("%s: implausible example count %u (more than %u)", path,
                        words[1], kMaxExamples));
  }
  return std::vector<uint32_t>(words.begin() + 1, words.end());
}

// An open IDX file, positioned just after its header.
struct IdxFile {
  GzFile file;
  int64_t count = 0;
};

absl::StatusOr<IdxFile> OpenImages(const std::string& path) {
  absl::StatusOr<GzFile> file = Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::vector<uint32_t>> dims =
      ReadHeader(file->get(), path, kImagesMagic, 3);
  if (!dims.ok()) return dims.status();
  if ((*dims)[1] != kFashionMnistRows || (*dims)[2] != kFashionMnistCols) {
    return absl::DataLossError(absl::StrFormat(
        "%s: images are %ux%u, expected 28x28", path, (*dims)[1], (*dims)[2]));
  }
  return IdxFile{std::move(*file), (*dims)[0]};
}

absl::StatusOr<IdxFile> OpenLabels(const std::string& path) {
  absl::StatusOr<GzFile> file = Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::vector<uint32_t>> dims =
      ReadHeader(file->get(), path, kLabelsMagic, 1);
  if (!dims.ok()) return dims.status();
  return IdxFile{std::move(*file), (*dims)[0]};
}

// First touches of fresh memory dominate loading: ~2 s for the training
// set's 188 MB on VMs where each 4 KiB page fault is expensive, ~0.05 s with
// 2 MiB pages. So ask for transparent huge pages on the big image tensor
// (advice only: harmless where they are off or unsupported).
void AdviseHugePages(void* data, size_t size) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + size) & ~(kHugePage - 1);
  if (end > begin) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#endif
}

absl::Status ReadToEnd(IdxFile& idx, const std::string& path, int64_t n) {
  return n == idx.count ? ExpectEnd(idx.file.get(), path) : absl::OkStatus();
}

// Reads the first `n` images, normalizing them on the way through a table of
// the 256 pixel values (this libtorch's own uint8 -> float conversion takes
// ~1 s for the training set). When `n` is all of them, also checks that
// nothing follows.
absl::StatusOr<torch::Tensor> ReadImages(IdxFile& idx, const std::string& path,
                                         int64_t n) {
  float table[256];
  for (int v = 0; v < 256; ++v) {
    table[v] = (v / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  torch::Tensor images =
      torch::empty({n, 1, kFashionMnistRows, kFashionMnistCols});
  AdviseHugePages(images.data_ptr(), images.nbytes());
  float* out = images.data_ptr<float>();
  constexpr int64_t kChunk = 1024;  // images per gzread
  std::vector<uint8_t> pixels(kChunk * kPixels);
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t count = std::min(kChunk, n - first);
    if (absl::Status s = ReadExact(
            idx.file.get(), path, pixels.data(), count * kPixels,
            absl::StrFormat("images %d to %d", first, first + count - 1));
        !s.ok()) {
      return s;
    }
    for (int64_t i = 0; i < count * kPixels; ++i) {
      out[first * kPixels + i] = table[pixels[i]];
    }
  }
  if (absl::Status s = ReadToEnd(idx, path, n); !s.ok()) return s;
  return images;
}

// Reads the first `n` labels and checks that they are class ids.
absl::StatusOr<torch::Tensor> ReadLabels(IdxFile& idx, const std::string& path,
                                         int64_t n) {
  std::vector<uint8_t> bytes(n);
  if (absl::Status s = ReadExact(idx.file.get(), path, bytes.data(), n,
                                 absl::StrCat(n, " labels"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadToEnd(idx, path, n); !s.ok()) return s;
  torch::Tensor labels = torch::empty({n}, torch::kInt64);
  int64_t* out = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (bytes[i] >= kFashionMnistClasses) {
      return absl::DataLossError(absl::StrFormat(
          "%s: label %d of example %d is outside [0, 10)", path, bytes[i], i));
    }
    out[i] = bytes[i];
  }
  return labels;
}

absl::StatusOr<Dataset> Load(const std::string& images_path,
                             const std::string& labels_path, int64_t limit) {
  absl::StatusOr<IdxFile> images = OpenImages(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxFile> labels = OpenLabels(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->count != labels->count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds %d images but %s holds %d labels", images_path, images->count,
        labels_path, labels->count));
  }
  const int64_t n = limit < 0 ? images->count : std::min(limit, images->count);
  absl::StatusOr<torch::Tensor> pixels = ReadImages(*images, images_path, n);
  if (!pixels.ok()) return pixels.status();
  absl::StatusOr<torch::Tensor> classes = ReadLabels(*labels, labels_path, n);
  if (!classes.ok()) return classes.status();
  return Dataset{*std::move(pixels), *std::move(classes)};
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, range), range >= 1, by rejection (no modulo bias). Unlike
// std::uniform_int_distribution, the result is the same on every platform.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t range) {
  const uint64_t reject_from = UINT64_MAX - (UINT64_MAX % range + 1) % range;
  uint64_t x;
  do {
    x = rng();
  } while (x > reject_from);
  return x % range;
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, bool train,
                                         int64_t limit) {
  if (limit < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Fashion-MNIST limit must be -1 (all) or >= 0, got ", limit));
  }
  const std::string prefix = absl::StrCat(dir, train ? "/train" : "/t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  if (absl::Status s = CheckPresent(dir, images_path, labels_path); !s.ok()) {
    return s;
  }
  // libtorch throws only when an allocation fails here; keep it inside.
  try {
    return Load(images_path, labels_path, limit);
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("loading ", images_path, ": ", e.what()));
  }
}

Dataset ShardDataset(const Dataset& data, uint32_t worker_id,
                     uint32_t num_workers) {
  TORCH_CHECK(num_workers > 0 && worker_id < num_workers,
              "ShardDataset: worker_id ", worker_id,
              " must be below num_workers ", num_workers);
  const int64_t n = data.size();
  torch::Tensor indices =
      worker_id < n
          ? torch::arange(static_cast<int64_t>(worker_id), n,
                          static_cast<int64_t>(num_workers), torch::kInt64)
          : torch::empty({0}, torch::kInt64);
  return Dataset{data.images.index_select(0, indices),
                 data.labels.index_select(0, indices)};
}

BatchOrder::BatchOrder(int64_t num_examples, int64_t batch_size, uint64_t seed,
                       bool drop_last)
    : num_examples_(num_examples),
      batch_size_(batch_size),
      seed_(seed),
      drop_last_(drop_last) {
  TORCH_CHECK(num_examples >= 0, "BatchOrder: num_examples ", num_examples,
              " < 0");
  TORCH_CHECK(batch_size >= 1, "BatchOrder: batch_size ", batch_size, " < 1");
}

int64_t BatchOrder::num_batches() const {
  return drop_last_ ? num_examples_ / batch_size_
                    : (num_examples_ + batch_size_ - 1) / batch_size_;
}

torch::Tensor BatchOrder::Permutation(uint64_t epoch) const {
  std::mt19937_64 rng(SplitMix64(SplitMix64(seed_) ^ epoch));
  torch::Tensor order = torch::arange(num_examples_, torch::kInt64);
  int64_t* p = order.data_ptr<int64_t>();
  for (int64_t i = num_examples_ - 1; i > 0; --i) {
    std::swap(p[i], p[UniformBelow(rng, static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

std::vector<torch::Tensor> BatchOrder::Batches(uint64_t epoch) const {
  const torch::Tensor order = Permutation(epoch);
  std::vector<torch::Tensor> batches;
  batches.reserve(num_batches());
  for (int64_t b = 0; b < num_batches(); ++b) {
    const int64_t start = b * batch_size_;
    batches.push_back(
        order.narrow(0, start, std::min(batch_size_, num_examples_ - start)));
  }
  return batches;
}

}  // namespace gradwire
