// The device-generic parts of worker/device_chunks.h. Writing pulled chunks
// uses only libtorch ops that run on any device, so CPU tensors check their
// arithmetic here against the CPU replica's AccumulateInto/DecompressInto.
// The device compression itself is tested in tests/common/cuda_*.
#include "worker/device_chunks.h"

#include <cstring>
#include <vector>

#include "common/compress/registry.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

std::vector<float> Values(const torch::Tensor& t) {
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A pulled chunk: `name` applied to a fixed input of `numel` elements.
CompressedChunk Pulled(const std::string& name, uint64_t numel) {
  CompressorOptions options;
  options.name = name;
  options.ratio = 0.2;
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok());
  torch::Tensor x = torch::linspace(-3, 5, numel, torch::kFloat32).sin_();
  CompressedChunk chunk;
  EXPECT_TRUE((*compressor)
                  ->Compress(absl::MakeSpan(x.data_ptr<float>(), numel),
                             CompressContext{}, &chunk)
                  .ok());
  return chunk;
}

class WriteChunkTest : public ::testing::TestWithParam<std::string> {};

TEST_P(WriteChunkTest, AddsDeltasLikeTheCpuReplica) {
  const uint64_t offset = 7, numel = 50;
  const CompressedChunk chunk = Pulled(GetParam(), numel);
  torch::Tensor parameter =
      torch::linspace(0.1, 0.9, 64, torch::kFloat32).reshape({8, 8});
  std::vector<float> expected = Values(parameter);
  AccumulateInto(chunk, 1.0f, absl::MakeSpan(expected.data() + offset, numel));
  WriteChunkToDevice(chunk, /*delta=*/true, parameter, offset);
  EXPECT_TRUE(SameBits(expected, Values(parameter)));
}

TEST_P(WriteChunkTest, OverwritesWithWeights) {
  const uint64_t offset = 3, numel = 50;
  const CompressedChunk chunk = Pulled(GetParam(), numel);
  torch::Tensor parameter = torch::ones({64}, torch::kFloat32);
  std::vector<float> expected = Values(parameter);
  DecompressInto(chunk, absl::MakeSpan(expected.data() + offset, numel));
  WriteChunkToDevice(chunk, /*delta=*/false, parameter, offset);
  EXPECT_TRUE(SameBits(expected, Values(parameter)));
}

INSTANTIATE_TEST_SUITE_P(Encodings, WriteChunkTest,
                         ::testing::Values("topk", "randomk", "none", "fp16",
                                           "qsgd", "onebit"));

TEST(ChunkViewTest, IsAFlatSliceOfTheStorage) {
  torch::Tensor t = torch::arange(0, 12, torch::kFloat32).reshape({3, 4});
  torch::Tensor view = ChunkView(t, 5, 4);
  EXPECT_EQ(Values(view.contiguous()), (std::vector<float>{5, 6, 7, 8}));
  view.fill_(-1);
  EXPECT_EQ(t[1][1].item<float>(), -1.0f);
  EXPECT_EQ(t[2][1].item<float>(), 9.0f);
}

TEST(DeviceChunkCompressorTest, OnlyTheDeviceCompressorsRunThere) {
  CompressorOptions options;
  options.name = "topk";
  auto topk = DeviceChunkCompressor::Create(options, true);
  if (!CudaKernelsBuilt()) {
    // Without the kernels every CUDA chunk goes through the host.
    ASSERT_TRUE(topk.ok()) << topk.status();
    EXPECT_EQ(*topk, nullptr);
  } else if (CudaDeviceCount() == 0) {
    // Kernels that cannot run: a clear error, not a silent host path.
    EXPECT_EQ(topk.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(topk.status().message().find("GRADWIRE_CUDA=OFF"),
              std::string::npos)
        << topk.status();
  } else {
    ASSERT_TRUE(topk.ok()) << topk.status();
    EXPECT_NE(*topk, nullptr);
  }
  options.name = "qsgd";
  auto qsgd = DeviceChunkCompressor::Create(options, true);
  ASSERT_TRUE(qsgd.ok()) << qsgd.status();
  EXPECT_EQ(*qsgd, nullptr);
}

}  // namespace
}  // namespace gradwire
