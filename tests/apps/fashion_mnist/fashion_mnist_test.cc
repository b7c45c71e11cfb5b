#include "apps/fashion_mnist/fashion_mnist.h"

#include <stdlib.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

bool PackageInstalled() {
  return fs::exists(
      absl::StrCat(kFashionMnistDefaultDir, "/train-images-idx3-ubyte.gz"));
}

#define SKIP_WITHOUT_PACKAGE()                                       \
  if (!PackageInstalled())                                           \
  GTEST_SKIP() << "Fashion-MNIST is not installed in "               \
               << kFashionMnistDefaultDir                            \
               << ": apt-get install dataset-fashion-mnist (or run " \
                  "scripts/install-deps.sh)"

// The real training set, loaded once for the tests that only read it.
class FashionMnistTrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!PackageInstalled()) return;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Dataset> data = LoadFashionMnist(kFashionMnistDefaultDir,
                                                    /*train=*/true);
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(data.ok()) << data.status();
    std::cout << "loaded 60000 training examples in " << took.count() << " s\n";
    train_ = new Dataset(*std::move(data));
  }
  static void TearDownTestSuite() {
    delete train_;
    train_ = nullptr;
  }
  void SetUp() override { SKIP_WITHOUT_PACKAGE(); }

  static Dataset* train_;
};
Dataset* FashionMnistTrainTest::train_ = nullptr;

TEST_F(FashionMnistTrainTest, HasSixtyThousandNormalizedExamples) {
  const Dataset& d = *train_;
  ASSERT_EQ(d.size(), 60000);
  EXPECT_EQ(d.images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(d.images.scalar_type(), torch::kFloat32);
  EXPECT_EQ(d.labels.sizes(), (std::vector<int64_t>{60000}));
  EXPECT_EQ(d.labels.scalar_type(), torch::kInt64);
  EXPECT_NEAR(d.images.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(d.images.std().item<double>(), 1.0, 0.01);
  EXPECT_NEAR(d.images.min().item<double>(), -0.2860 / 0.3530, 1e-5);
  EXPECT_NEAR(d.images.max().item<double>(), (1 - 0.2860) / 0.3530, 1e-5);
}

TEST_F(FashionMnistTrainTest, HasSixThousandOfEachClass) {
  const torch::Tensor counts = torch::bincount(train_->labels);
  ASSERT_EQ(counts.size(0), 10);  // so all labels are in [0, 10)
  EXPECT_TRUE(torch::equal(counts, torch::full({10}, 6000, torch::kInt64)));
}

TEST_F(FashionMnistTrainTest, LimitKeepsThePrefix) {
  absl::StatusOr<Dataset> head =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/true, 100);
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_EQ(head->size(), 100);
  EXPECT_TRUE(torch::equal(head->images, train_->images.narrow(0, 0, 100)));
  EXPECT_TRUE(torch::equal(head->labels, train_->labels.narrow(0, 0, 100)));
}

TEST_F(FashionMnistTrainTest, ShardsMatchTheStridedIndices) {
  const uint32_t workers = 7;
  int64_t total = 0;
  for (uint32_t w = 0; w < workers; ++w) {
    const Dataset shard = ShardDataset(*train_, w, workers);
    const torch::Tensor idx =
        torch::arange(static_cast<int64_t>(w), 60000, 7, torch::kInt64);
    EXPECT_TRUE(
        torch::equal(shard.images, train_->images.index_select(0, idx)));
    EXPECT_TRUE(
        torch::equal(shard.labels, train_->labels.index_select(0, idx)));
    total += shard.size();
  }
  EXPECT_EQ(total, 60000);
}

TEST(FashionMnistTest, LoadsTheTestSet) {
  SKIP_WITHOUT_PACKAGE();
  absl::StatusOr<Dataset> d =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->images.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_TRUE(torch::equal(torch::bincount(d->labels),
                           torch::full({10}, 1000, torch::kInt64)));
}

TEST(FashionMnistTest, LimitBeyondTheCountKeepsAllAndZeroKeepsNone) {
  SKIP_WITHOUT_PACKAGE();
  absl::StatusOr<Dataset> all =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/false, 20000);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 10000);
  absl::StatusOr<Dataset> none =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/false, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->images.sizes(), (std::vector<int64_t>{0, 1, 28, 28}));
}

TEST(FashionMnistTest, NegativeLimitIsRejected) {
  absl::StatusOr<Dataset> d =
      LoadFashionMnist(kFashionMnistDefaultDir, /*train=*/false, -2);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FashionMnistTest, MissingDirectorySaysHowToInstall) {
  absl::StatusOr<Dataset> d = LoadFashionMnist("/nonexistent/fmnist", true);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      d.status().message(),
      AllOf(HasSubstr("Fashion-MNIST not found in /nonexistent/fmnist"),
            HasSubstr("apt-get install dataset-fashion-mnist"),
            HasSubstr("scripts/install-deps.sh"), HasSubstr("--data-dir")));
}

// Sharding a data set whose labels are the example indices shows the
// partition directly: the shards' labels, together, are each index once.
TEST(ShardDatasetTest, PartitionsExactly) {
  for (int64_t n : {0, 1, 2, 10, 101}) {
    for (uint32_t workers : {1u, 2u, 3u, 7u, 16u}) {
      const Dataset data{torch::zeros({n, 1, 28, 28}),
                         torch::arange(n, torch::kInt64)};
      std::vector<torch::Tensor> labels;
      for (uint32_t w = 0; w < workers; ++w) {
        const Dataset shard = ShardDataset(data, w, workers);
        ASSERT_EQ(shard.images.size(0), shard.size());
        EXPECT_LE(shard.size(), (n + workers - 1) / workers);
        EXPECT_GE(shard.size(), n / workers);
        labels.push_back(shard.labels);
      }
      const torch::Tensor all = std::get<0>(torch::cat(labels).sort());
      EXPECT_TRUE(torch::equal(all, torch::arange(n, torch::kInt64)))
          << "n=" << n << " workers=" << workers;
    }
  }
}

TEST(ShardDatasetTest, RejectsAWorkerIdOutOfRange) {
  const Dataset data{torch::zeros({4, 1, 28, 28}),
                     torch::arange(4, torch::kInt64)};
  EXPECT_THROW(ShardDataset(data, 3, 3), c10::Error);
  EXPECT_THROW(ShardDataset(data, 0, 0), c10::Error);
}

// Writes Fashion-MNIST-shaped files into a fresh temporary directory, to
// check the loader's validation without the package.
class FashionMnistFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "fashion_mnist_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ImagesPath() const {
    return dir_ + "/train-images-idx3-ubyte.gz";
  }
  std::string LabelsPath() const {
    return dir_ + "/train-labels-idx1-ubyte.gz";
  }

  static std::string Idx(std::vector<uint32_t> header,
                         const std::string& body) {
    std::string bytes;
    for (uint32_t word : header) {
      for (int shift = 24; shift >= 0; shift -= 8) {
        bytes.push_back(static_cast<char>(word >> shift & 0xff));
      }
    }
    return bytes + body;
  }
  static void WriteGzip(const std::string& path, const std::string& bytes) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(file), Z_OK);
  }
  // Three images (pixels all 0, all 255, all 51) and their labels.
  void WriteValid() {
    WriteGzip(ImagesPath(),
              Idx({0x803, 3, 28, 28}, std::string(784, '\0') +
                                          std::string(784, '\xff') +
                                          std::string(784, 51)));
    WriteGzip(LabelsPath(), Idx({0x801, 3}, std::string("\x00\x09\x04", 3)));
  }
  absl::Status Load() { return LoadFashionMnist(dir_, true).status(); }

  std::string dir_;
};

TEST_F(FashionMnistFilesTest, LoadsAndNormalizesAValidSet) {
  WriteValid();
  absl::StatusOr<Dataset> d = LoadFashionMnist(dir_, true);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3);
  EXPECT_TRUE(torch::equal(d->labels, torch::tensor({0, 9, 4}, torch::kInt64)));
  const float mean = kFashionMnistMean, std = kFashionMnistStd;
  EXPECT_FLOAT_EQ(d->images[0].min().item<float>(), -mean / std);
  EXPECT_FLOAT_EQ(d->images[1].max().item<float>(), (1 - mean) / std);
  EXPECT_FLOAT_EQ(d->images[2][0][5][7].item<float>(), (0.2f - mean) / std);
}

TEST_F(FashionMnistFilesTest, MissingLabelsFileIsNamed) {
  WriteValid();
  fs::remove(LabelsPath());
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(LabelsPath()),
                                 HasSubstr("apt-get install "
                                           "dataset-fashion-mnist")));
}

TEST_F(FashionMnistFilesTest, WrongImagesMagicIsNamed) {
  WriteValid();
  WriteGzip(ImagesPath(), Idx({0x801, 3, 28, 28}, std::string(3 * 784, 'a')));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(ImagesPath()),
                                 HasSubstr("magic number is 0x00000801"),
                                 HasSubstr("expected 0x00000803")));
}

TEST_F(FashionMnistFilesTest, WrongLabelsMagicIsNamed) {
  WriteValid();
  WriteGzip(LabelsPath(), Idx({0x803, 3}, "abc"));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(LabelsPath()), HasSubstr("expected 0x00000801")));
}

TEST_F(FashionMnistFilesTest, WrongImageSizeIsNamed) {
  WriteValid();
  WriteGzip(ImagesPath(), Idx({0x803, 3, 32, 32}, std::string(3 * 1024, 'a')));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(ImagesPath()),
                                 HasSubstr("32x32, expected 28x28")));
}

TEST_F(FashionMnistFilesTest, CountMismatchNamesBothFiles) {
  WriteValid();
  WriteGzip(LabelsPath(), Idx({0x801, 2}, "ab"));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(ImagesPath()), HasSubstr("3 images"),
                    HasSubstr(LabelsPath()), HasSubstr("2 labels")));
}

TEST_F(FashionMnistFilesTest, TruncatedBodyIsNamed) {
  WriteValid();
  WriteGzip(ImagesPath(), Idx({0x803, 3, 28, 28}, std::string(2 * 784, 'a')));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(ImagesPath()), HasSubstr("truncated")));
}

TEST_F(FashionMnistFilesTest, TrailingBytesAreNamed) {
  WriteValid();
  WriteGzip(LabelsPath(), Idx({0x801, 3}, "\x01\x02\x03\x04"));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(LabelsPath()), HasSubstr("trailing bytes")));
}

TEST_F(FashionMnistFilesTest, LabelOutOfRangeIsNamed) {
  WriteValid();
  WriteGzip(LabelsPath(), Idx({0x801, 3}, "\x01\x0a\x03"));
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(LabelsPath()),
                                 HasSubstr("label 10 of example 1")));
}

TEST_F(FashionMnistFilesTest, CorruptGzipIsNamed) {
  WriteValid();
  // A gzip header followed by bytes that are not a deflate stream.
  const std::string garbage =
      std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) +
      std::string(4000, '\xff');
  FILE* f = fopen(ImagesPath().c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fwrite(garbage.data(), 1, garbage.size(), f), garbage.size());
  fclose(f);
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(ImagesPath()), HasSubstr("zlib")));
}

TEST_F(FashionMnistFilesTest, CutOffGzipIsNamed) {
  WriteValid();
  fs::resize_file(ImagesPath(), fs::file_size(ImagesPath()) / 2);
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(ImagesPath()));
}

std::vector<int64_t> ToVector(const torch::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(),
                              t.data_ptr<int64_t>() + t.numel());
}

TEST(BatchOrderTest, SameSeedAndEpochGiveTheSameOrder) {
  const BatchOrder a(1000, 32, 7), b(1000, 32, 7);
  EXPECT_TRUE(torch::equal(a.Permutation(3), b.Permutation(3)));
  EXPECT_FALSE(torch::equal(a.Permutation(3), a.Permutation(4)));
  EXPECT_FALSE(
      torch::equal(a.Permutation(3), BatchOrder(1000, 32, 8).Permutation(3)));
}

// The order is specified (SplitMix64 + mt19937_64 + Fisher-Yates), so it is
// pinned: a change here would change every training run's data order.
TEST(BatchOrderTest, OrderIsPinned) {
  EXPECT_EQ(ToVector(BatchOrder(10, 4, 42).Permutation(0)),
            (std::vector<int64_t>{2, 0, 4, 7, 8, 3, 5, 1, 9, 6}));
}

TEST(BatchOrderTest, PermutationVisitsEachIndexOnce) {
  const torch::Tensor p = BatchOrder(1000, 32, 1).Permutation(0);
  EXPECT_TRUE(
      torch::equal(std::get<0>(p.sort()), torch::arange(1000, torch::kInt64)));
}

TEST(BatchOrderTest, BatchesCutThePermutation) {
  const BatchOrder order(10, 4, 5);
  ASSERT_EQ(order.num_batches(), 3);
  const std::vector<torch::Tensor> batches = order.Batches(2);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(0), 4);
  EXPECT_EQ(batches[1].size(0), 4);
  EXPECT_EQ(batches[2].size(0), 2);
  EXPECT_TRUE(torch::equal(torch::cat(batches), order.Permutation(2)));

  const BatchOrder dropping(10, 4, 5, /*drop_last=*/true);
  EXPECT_EQ(dropping.num_batches(), 2);
  EXPECT_EQ(dropping.Batches(2).size(), 2u);
  EXPECT_EQ(BatchOrder(0, 4, 5).Batches(0).size(), 0u);
}

}  // namespace
}  // namespace gradwire
