// The CUDA compressors (common/cuda) against the CPU compressors: on the
// same inputs, with error feedback over several steps, the chunks and the
// residuals must agree bit for bit. Cases that need a device skip, with
// "no CUDA device: ...", where the runtime reports none.
#include "common/cuda/device_compressor.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "common/cuda/kernels.h"
#include "common/precision.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

// Skips the calling test when there is no device to run on.
#define SKIP_WITHOUT_DEVICE()                                              \
  do {                                                                     \
    int count_ = 0;                                                        \
    const cudaError_t error_ = cudaGetDeviceCount(&count_);                \
    if (error_ != cudaSuccess || count_ == 0) {                            \
      GTEST_SKIP() << "no CUDA device: "                                   \
                   << (error_ != cudaSuccess ? cudaGetErrorString(error_)  \
                                             : "the runtime reports none") \
                   << "; the device comparisons did not run";              \
    }                                                                      \
  } while (false)

// A device buffer of n elements of T.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (cudaMalloc(&data_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc of " << n << " elements failed";
      data_ = nullptr;
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host)
      : DeviceBuffer(host.size()) {
    Upload(host);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), n_);
    ASSERT_EQ(
        cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(
        cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return host;
  }
  T* get() { return static_cast<T*>(data_); }

 private:
  size_t n_;
  void* data_ = nullptr;
};

std::vector<float> Normal(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// Values on a coarse grid, both signs: many exact magnitude ties.
std::vector<float> Ties(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-4, 4);
  std::vector<float> x(n);
  for (float& v : x) v = 0.25f * level(rng);
  return x;
}

// Equal bit patterns (so -0 differs from +0 and NaNs compare), reporting
// the first difference.
::testing::AssertionResult SameBits(const std::vector<float>& expected,
                                    const std::vector<float>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "sizes " << expected.size() << " and " << actual.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (BitsOfFloat(expected[i]) != BitsOfFloat(actual[i])) {
      return ::testing::AssertionFailure()
             << "element " << i << ": expected " << expected[i] << " (0x"
             << std::hex << BitsOfFloat(expected[i]) << "), got " << std::dec
             << actual[i] << " (0x" << std::hex << BitsOfFloat(actual[i])
             << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameChunk(const CompressedChunk& expected,
                                     const CompressedChunk& actual) {
  if (expected.encoding != actual.encoding || expected.numel != actual.numel ||
      expected.precision != actual.precision || expected.seed != actual.seed) {
    return ::testing::AssertionFailure()
           << "encoding, numel, precision or seed differ";
  }
  if (expected.indices != actual.indices) {
    size_t i = 0;
    while (i < expected.indices.size() && i < actual.indices.size() &&
           expected.indices[i] == actual.indices[i]) {
      ++i;
    }
    return ::testing::AssertionFailure()
           << "indices differ at position " << i << " of "
           << expected.indices.size() << " (device has "
           << actual.indices.size() << ")";
  }
  if (auto values = SameBits(expected.values, actual.values); !values) {
    return ::testing::AssertionFailure() << "values: " << values.message();
  }
  return ::testing::AssertionSuccess();
}

CompressorOptions Options(const std::string& name, ValuePrecision precision) {
  CompressorOptions options;
  options.name = name;
  options.ratio = 0.01;
  options.threshold = 1.5f;
  options.precision = precision;
  return options;
}

// Runs `steps` error-feedback steps on the CPU and on the device from the
// same gradients and compares every chunk and residual.
void ExpectSameFeedback(const CompressorOptions& options, size_t n,
                        bool with_ties, int steps = 4) {
  auto cpu = MakeCompressor(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(device.ok()) << device.status();
  FeedbackState state;
  DeviceBuffer<float> residual(std::vector<float>(n, 0.0f));
  DeviceBuffer<float> gradient(n);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(absl::StrFormat("%s n=%d step %d", options.name, n, step));
    const uint32_t seed = static_cast<uint32_t>(n * 7 + step);
    // Growing scale: the residual and the new gradient compete.
    const std::vector<float> g =
        with_ties ? Ties(n, seed) : Normal(n, seed, 1.0f + step);
    gradient.Upload(g);
    CompressContext ctx;
    ctx.chunk_key = 3;
    ctx.step = step;
    CompressedChunk expected, actual;
    ASSERT_TRUE((*cpu)->CompressWithFeedback(g, ctx, &state, &expected).ok());
    ASSERT_TRUE((*device)
                    ->CompressWithFeedback(gradient.get(), residual.get(), n,
                                           ctx, DeviceLocation{}, &actual)
                    .ok());
    EXPECT_TRUE(SameChunk(expected, actual));
    EXPECT_TRUE(SameBits(state.residual, residual.Download()));
  }
}

// ------------------------------------------------ without a device, too

TEST(CudaCompressFactoryTest, RunsTheSimpleCompressorsOnly) {
  EXPECT_TRUE(CudaKernelsBuilt());
  for (const char* name :
       {"none", "fp16", "bf16", "topk", "threshold", "randomk"}) {
    EXPECT_TRUE(DeviceCompressor::RunsOnDevice(name)) << name;
    auto created =
        DeviceCompressor::Create(Options(name, ValuePrecision::kFp32));
    EXPECT_TRUE(created.ok()) << name << ": " << created.status();
  }
  for (const char* name : {"qsgd", "onebit", "dgc"}) {
    EXPECT_FALSE(DeviceCompressor::RunsOnDevice(name)) << name;
    EXPECT_EQ(DeviceCompressor::Create(Options(name, ValuePrecision::kFp32))
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  CompressorOptions bad = Options("topk", ValuePrecision::kFp32);
  bad.ratio = 2.0;
  EXPECT_EQ(DeviceCompressor::Create(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(
      DeviceCompressor::Create(Options("nosuch", ValuePrecision::kFp32)).ok());
}

TEST(CudaCompressFactoryTest, ForcesThePrecisionOfFp16AndBf16) {
  auto fp16 = DeviceCompressor::Create(Options("fp16", ValuePrecision::kFp32));
  ASSERT_TRUE(fp16.ok());
  EXPECT_EQ((*fp16)->options().precision, ValuePrecision::kFp16);
}

// A device ordinal past the last one: a clear error with or without GPUs.
TEST(CudaCompressFactoryTest, ReportsAMissingDevice) {
  auto topk = DeviceCompressor::Create(Options("topk", ValuePrecision::kFp32));
  ASSERT_TRUE(topk.ok());
  float dummy = 0.0f;
  DeviceLocation where;
  where.device = CudaDeviceCount();
  CompressedChunk out;
  const absl::Status s =
      (*topk)->Compress(&dummy, 1, CompressContext{}, where, &out);
  if (CudaDeviceCount() == 0) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s;
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

// ------------------------------------------------------- on the device

class CudaFeedbackTest : public ::testing::TestWithParam<
                             std::tuple<std::string, ValuePrecision, size_t>> {
};

TEST_P(CudaFeedbackTest, MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const auto& [name, precision, n] = GetParam();
  ExpectSameFeedback(Options(name, precision), n, /*with_ties=*/false);
}

TEST_P(CudaFeedbackTest, MatchesTheCpuOnTiedMagnitudes) {
  SKIP_WITHOUT_DEVICE();
  const auto& [name, precision, n] = GetParam();
  ExpectSameFeedback(Options(name, precision), n, /*with_ties=*/true);
}

TEST_P(CudaFeedbackTest, CompressWithoutFeedbackMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto& [name, precision, n] = GetParam();
  const CompressorOptions options = Options(name, precision);
  auto cpu = MakeCompressor(options);
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(cpu.ok() && device.ok());
  const std::vector<float> x = Normal(n, 5, 2.0f);
  DeviceBuffer<float> input(x);
  CompressContext ctx;
  ctx.chunk_key = 9;
  CompressedChunk expected, actual;
  ASSERT_TRUE((*cpu)->Compress(x, ctx, &expected).ok());
  ASSERT_TRUE(
      (*device)->Compress(input.get(), n, ctx, DeviceLocation{}, &actual).ok());
  EXPECT_TRUE(SameChunk(expected, actual));
  EXPECT_TRUE(SameBits(x, input.Download()));  // Input untouched.
}

INSTANTIATE_TEST_SUITE_P(
    NamesPrecisionsSizes, CudaFeedbackTest,
    ::testing::Combine(
        ::testing::Values("topk", "threshold", "randomk", "none", "fp16",
                          "bf16"),
        ::testing::Values(ValuePrecision::kFp32, ValuePrecision::kFp16,
                          ValuePrecision::kBf16),
        // One element, partial tiles, exactly one tile, and a 4 MiB chunk.
        ::testing::Values(size_t{1}, size_t{97}, size_t{4096}, size_t{12293},
                          size_t{1} << 20)));

TEST(CudaTopKTest, KeepsExactlyKAtEveryCount) {
  SKIP_WITHOUT_DEVICE();
  for (uint64_t k : {0u, 1u, 2u, 999u, 4095u, 4096u, 10000u, 10001u}) {
    CompressorOptions options = Options("topk", ValuePrecision::kFp32);
    options.k = k;
    SCOPED_TRACE(k);
    ExpectSameFeedback(options, 10001, /*with_ties=*/true, /*steps=*/2);
    ExpectSameFeedback(options, 10001, /*with_ties=*/false, /*steps=*/2);
  }
}

TEST(CudaTopKTest, TakesTheLowestIndicesAmongEqualMagnitudes) {
  SKIP_WITHOUT_DEVICE();
  // Every magnitude equal, both signs and zeros of both signs.
  const size_t n = 9000;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  x[17] = -0.0f;
  CompressorOptions options = Options("topk", ValuePrecision::kFp32);
  options.k = 5000;
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(device.ok());
  DeviceBuffer<float> input(x);
  CompressedChunk out;
  ASSERT_TRUE(
      (*device)
          ->Compress(input.get(), n, CompressContext{}, DeviceLocation{}, &out)
          .ok());
  std::vector<uint32_t> expected;
  for (uint32_t i = 0; expected.size() < 5000; ++i) {
    if (i != 17) expected.push_back(i);
  }
  EXPECT_EQ(out.indices, expected);
}

TEST(CudaDenseTest, SaturatesLikeTheCpu) {
  SKIP_WITHOUT_DEVICE();
  // Past the fp16 range, at its edge, fp16 and fp32 subnormals, halfway
  // cases of both 16-bit formats, and values far past fp16 whose sums over
  // the steps stay finite.
  std::vector<float> g = {1e6f,     -7e4f,     65504.0f,   65519.0f,
                          65520.0f, -65536.0f, 1e-5f,      -6e-8f,
                          3e-8f,    1e-40f,    1.0009766f, 1.00390625f,
                          1e30f,    -2e35f,    0.0f,       -0.0f};
  for (const char* name : {"fp16", "bf16"}) {
    auto cpu = MakeCompressor(Options(name, ValuePrecision::kFp32));
    auto device =
        DeviceCompressor::Create(Options(name, ValuePrecision::kFp32));
    ASSERT_TRUE(cpu.ok() && device.ok());
    FeedbackState state;
    DeviceBuffer<float> residual(std::vector<float>(g.size(), 0.0f));
    DeviceBuffer<float> gradient(g);
    for (int step = 0; step < 3; ++step) {
      CompressedChunk expected, actual;
      ASSERT_TRUE(
          (*cpu)
              ->CompressWithFeedback(g, CompressContext{}, &state, &expected)
              .ok());
      ASSERT_TRUE((*device)
                      ->CompressWithFeedback(gradient.get(), residual.get(),
                                             g.size(), CompressContext{},
                                             DeviceLocation{}, &actual)
                      .ok());
      EXPECT_TRUE(SameChunk(expected, actual)) << name << " step " << step;
      EXPECT_TRUE(SameBits(state.residual, residual.Download())) << name;
    }
  }
}

// The device conversions against common/precision.h over a sweep of all
// float bit patterns (NaN and infinities included).
TEST(CudaPrecisionTest, ConvertsLikeTheHost) {
  SKIP_WITHOUT_DEVICE();
  constexpr uint64_t kStride = 251;
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += kStride) {
    float f;
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
  }
  // Every fp16 and bf16 value, and the points halfway between neighbours.
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    x.push_back(HalfBitsToFloat(static_cast<uint16_t>(h)));
    x.push_back(Bf16BitsToFloat(static_cast<uint16_t>(h)));
    float f;
    const uint32_t mid = (h << 16) | 0x8000u;
    std::memcpy(&f, &mid, sizeof f);
    x.push_back(f);
    x.push_back(std::nextafter(f, 0.0f));
  }
  DeviceBuffer<float> input(x);
  DeviceBuffer<uint16_t> bits16(x.size());
  DeviceBuffer<float> back(x.size());
  using cuda_internal::Precision;
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    ASSERT_EQ(cuda_internal::LaunchRoundTrip(input.get(), x.size(), p,
                                             bits16.get(), back.get(), nullptr),
              cudaSuccess);
    const std::vector<uint16_t> device_bits = bits16.Download();
    const std::vector<float> device_back = back.Download();
    size_t mismatches = 0;
    for (size_t i = 0; i < x.size() && mismatches < 10; ++i) {
      const uint16_t want =
          p == Precision::kFp16 ? FloatToHalfBits(x[i]) : FloatToBf16Bits(x[i]);
      const float want_back =
          p == Precision::kFp16 ? HalfBitsToFloat(want) : Bf16BitsToFloat(want);
      if (device_bits[i] != want ||
          BitsOfFloat(device_back[i]) != BitsOfFloat(want_back)) {
        ++mismatches;
        ADD_FAILURE() << (p == Precision::kFp16 ? "fp16" : "bf16") << " of 0x"
                      << std::hex << BitsOfFloat(x[i]) << ": host 0x" << want
                      << ", device 0x" << device_bits[i];
      }
    }
  }
}

class CudaNonFiniteTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaNonFiniteTest, RejectsLikeTheCpuAndKeepsTheResidual) {
  SKIP_WITHOUT_DEVICE();
  const size_t n = 50000;
  const CompressorOptions options = Options(GetParam(), ValuePrecision::kFp32);
  auto cpu = MakeCompressor(options);
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(cpu.ok() && device.ok());
  FeedbackState state;
  DeviceBuffer<float> residual(std::vector<float>(n, 0.0f));
  std::vector<float> g = Normal(n, 1);
  DeviceBuffer<float> gradient(g);
  CompressedChunk expected, actual;
  ASSERT_TRUE(
      (*cpu)
          ->CompressWithFeedback(g, CompressContext{}, &state, &expected)
          .ok());
  ASSERT_TRUE((*device)
                  ->CompressWithFeedback(gradient.get(), residual.get(), n,
                                         CompressContext{}, DeviceLocation{},
                                         &actual)
                  .ok());
  const std::vector<float> before = residual.Download();
  g[31337] = std::numeric_limits<float>::infinity();
  g[40000] = std::numeric_limits<float>::quiet_NaN();
  gradient.Upload(g);
  const absl::Status cpu_status =
      (*cpu)->CompressWithFeedback(g, CompressContext{}, &state, &expected);
  const absl::Status device_status = (*device)->CompressWithFeedback(
      gradient.get(), residual.get(), n, CompressContext{}, DeviceLocation{},
      &actual);
  EXPECT_EQ(device_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_status, cpu_status);
  EXPECT_TRUE(SameBits(before, residual.Download()));
}

TEST_P(CudaNonFiniteTest, ZeroPolicyMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const size_t n = 20000;
  CompressorOptions options = Options(GetParam(), ValuePrecision::kFp16);
  options.non_finite = NonFinitePolicy::kZero;
  auto cpu = MakeCompressor(options);
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(cpu.ok() && device.ok());
  std::vector<float> g = Normal(n, 2, 4.0f);
  for (size_t i = 0; i < n; i += 97) {
    g[i] = (i % 2) ? std::numeric_limits<float>::quiet_NaN()
                   : -std::numeric_limits<float>::infinity();
  }
  FeedbackState state;
  DeviceBuffer<float> residual(std::vector<float>(n, 0.0f));
  DeviceBuffer<float> gradient(g);
  for (int step = 0; step < 2; ++step) {
    CompressedChunk expected, actual;
    ASSERT_TRUE(
        (*cpu)
            ->CompressWithFeedback(g, CompressContext{}, &state, &expected)
            .ok());
    ASSERT_TRUE((*device)
                    ->CompressWithFeedback(gradient.get(), residual.get(), n,
                                           CompressContext{}, DeviceLocation{},
                                           &actual)
                    .ok());
    EXPECT_TRUE(SameChunk(expected, actual));
    EXPECT_TRUE(SameBits(state.residual, residual.Download()));
  }
  CompressedChunk expected, actual;
  ASSERT_TRUE((*cpu)->Compress(g, CompressContext{}, &expected).ok());
  ASSERT_TRUE((*device)
                  ->Compress(gradient.get(), n, CompressContext{},
                             DeviceLocation{}, &actual)
                  .ok());
  EXPECT_TRUE(SameChunk(expected, actual));
}

INSTANTIATE_TEST_SUITE_P(Names, CudaNonFiniteTest,
                         ::testing::Values("topk", "threshold", "randomk",
                                           "none", "fp16"));

TEST(CudaCompressTest, RunsOnAStreamOfItsOwn) {
  SKIP_WITHOUT_DEVICE();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  DeviceLocation where;
  where.stream = stream;
  const size_t n = 300000;
  const CompressorOptions options = Options("topk", ValuePrecision::kBf16);
  auto cpu = MakeCompressor(options);
  auto device = DeviceCompressor::Create(options);
  ASSERT_TRUE(cpu.ok() && device.ok());
  const std::vector<float> x = Normal(n, 8);
  DeviceBuffer<float> input(x);
  CompressedChunk expected, actual;
  ASSERT_TRUE((*cpu)->Compress(x, CompressContext{}, &expected).ok());
  ASSERT_TRUE((*device)
                  ->Compress(input.get(), n, CompressContext{}, where, &actual)
                  .ok());
  EXPECT_TRUE(SameChunk(expected, actual));
  cudaStreamDestroy(stream);
}

TEST(CudaCompressTest, RefusesHostMemory) {
  SKIP_WITHOUT_DEVICE();
  auto device =
      DeviceCompressor::Create(Options("topk", ValuePrecision::kFp32));
  ASSERT_TRUE(device.ok());
  std::vector<float> host(100, 1.0f);
  DeviceBuffer<float> residual(100);
  CompressedChunk out;
  const absl::Status s = (*device)->CompressWithFeedback(
      host.data(), residual.get(), 100, CompressContext{}, DeviceLocation{},
      &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not CUDA device memory"), std::string::npos) << s;
}

}  // namespace
}  // namespace gradwire
