// Every vector kernel table returns, bit for bit, what the portable table
// returns: on random, tied, all-zero, subnormal and non-finite inputs, at
// every length around the vector widths and at unaligned starts.
#include "common/compress/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/precision.h"
#include "gtest/gtest.h"

namespace gradwire::compress_kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<uint32_t> Bits(const std::vector<float>& x) {
  std::vector<uint32_t> bits(x.size());
  // memcpy must not see the null data() of an empty vector.
  if (!x.empty()) std::memcpy(bits.data(), x.data(), x.size() * sizeof(float));
  return bits;
}

// The inputs every kernel is checked on, by name.
std::vector<std::pair<std::string, std::vector<float>>> Inputs(size_t n,
                                                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> random(n), tied(n), zero(n, 0.0f), edges(n), wild(n);
  // Values at the edges of the wire precisions: past and at fp16's largest,
  // halfway cases, fp16 and fp32 subnormals, signed zeros, bf16 overflow.
  const float edge_values[] = {65504.0f, 65519.0f,    65520.0f,   -65536.0f,
                               1e5f,     5.96e-8f,    2.98e-8f,   -1e-40f,
                               1e-45f,   -0.0f,       0.0f,       3.4e38f,
                               -3.4e38f, 1.00048828f, 1.0009765f, 6.1e-5f};
  const float wild_values[] = {kInf, -kInf, kNaN, -kNaN, 1.0f, -2.0f, 0.0f};
  for (size_t i = 0; i < n; ++i) {
    random[i] = normal(rng);
    tied[i] = static_cast<float>(static_cast<int>(rng() % 5) - 2) * 0.5f;
    edges[i] = edge_values[rng() % std::size(edge_values)] *
               (rng() % 2 ? 1.0f : -1.0f);
    wild[i] = rng() % 8 == 0 ? wild_values[rng() % std::size(wild_values)]
                             : normal(rng);
  }
  return {{"random", random},
          {"tied", tied},
          {"zero", zero},
          {"edges", edges},
          {"non-finite", wild}};
}

std::vector<const KernelTable*> VectorTables() {
  std::vector<const KernelTable*> tables;
  for (InstructionSet isa : {InstructionSet::kAvx2, InstructionSet::kAvx512}) {
    if (absl::optional<const KernelTable*> t = KernelsFor(isa)) {
      tables.push_back(*t);
    }
  }
  return tables;
}

// The portable table and every vector one.
std::vector<const KernelTable*> AllTables() {
  std::vector<const KernelTable*> tables = {&PortableKernels()};
  for (const KernelTable* t : VectorTables()) tables.push_back(t);
  return tables;
}

// Lengths around every vector width, and one long enough for the kernels'
// streaming stores (8 MiB of output).
const size_t kLengths[] = {0,  1,  7,  8,  9,   15,  16,   17,  31,
                           33, 63, 64, 65, 127, 129, 1000, 4099};
// Starts at every float offset within a cache line.
const size_t kOffsets[] = {0, 1, 3, 5, 8, 15};

std::string Where(const KernelTable& t, const std::string& input, size_t n,
                  size_t offset) {
  return std::string(InstructionSetName(t.isa)) + " on " + input + ", n " +
         std::to_string(n) + ", offset " + std::to_string(offset);
}

TEST(CompressKernelsTest, PortableTableIsAlwaysThere) {
  ASSERT_TRUE(KernelsFor(InstructionSet::kPortable).has_value());
  EXPECT_EQ(&PortableKernels(), *KernelsFor(InstructionSet::kPortable));
  EXPECT_EQ(ParseInstructionSet("avx512"), InstructionSet::kAvx512);
  EXPECT_EQ(ParseInstructionSet("sse9"), absl::nullopt);
  // Tell the log which tables this machine checks.
  for (const KernelTable* t : VectorTables()) {
    std::printf("checking %s against portable\n",
                std::string(InstructionSetName(t->isa)).c_str());
  }
}

// The collecting kernels write nothing past the room for n elements that
// their contract gives them (a vector store of a whole register at the
// append position would): the slots after it hold a guard pattern that
// must survive the call.
constexpr size_t kGuard = 64;
constexpr uint32_t kGuardBits = 0xdeadbeefu;
const float kGuardValue = -12345.5f;

template <typename T>
bool GuardIntact(const std::vector<T>& buffer, size_t n) {
  const T guard = std::is_same_v<T, float> ? static_cast<T>(kGuardValue)
                                           : static_cast<T>(kGuardBits);
  for (size_t i = n; i < buffer.size(); ++i) {
    if (buffer[i] != guard) return false;
  }
  return true;
}

// In place, and into a second buffer (streaming stores from its first
// aligned element on, at every offset): the same indices, values, sums and
// non-finite report as the portable kernel, which leaves the input residual
// of the second form as it was.
TEST(CompressKernelsTest, AccumulateAndCollectMatchesPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, g] : Inputs(n + offset, n * 31 + offset)) {
          for (bool zero : {false, true}) {
            for (bool in_place : {true, false}) {
              for (float threshold : {0.0f, 0.7f, 1.5f, kInf}) {
                for (float scale : {1.0f, 0.37f}) {
                  const std::vector<float> r_before(n + offset, 0.25f);
                  std::vector<float> r_want = r_before;
                  std::vector<float> r_got = r_before;
                  std::vector<float> sum_want(n + offset, -1.0f);
                  std::vector<float> sum_got = sum_want;
                  float* out_want = in_place ? r_want.data() : sum_want.data();
                  float* out_got = in_place ? r_got.data() : sum_got.data();
                  std::vector<uint32_t> want(n + 1),
                      got(n + kGuard, kGuardBits);
                  std::vector<float> want_values(n + 1);
                  std::vector<float> got_values(n + kGuard, kGuardValue);
                  bool want_non_finite = false;
                  bool got_non_finite = false;
                  const size_t nw = PortableKernels().accumulate_and_collect(
                      g.data() + offset, scale, zero, r_want.data() + offset,
                      out_want + offset, n, threshold, 7, want.data(),
                      want_values.data(), &want_non_finite);
                  const size_t ng = t->accumulate_and_collect(
                      g.data() + offset, scale, zero, r_got.data() + offset,
                      out_got + offset, n, threshold, 7, got.data(),
                      got_values.data(), &got_non_finite);
                  const std::string where = Where(*t, name, n, offset) +
                                            (in_place ? " in place" : " apart");
                  ASSERT_TRUE(GuardIntact(got, n) && GuardIntact(got_values, n))
                      << "wrote past room for n: " << where;
                  want.resize(nw);
                  got.resize(ng);
                  want_values.resize(nw);
                  got_values.resize(ng);
                  ASSERT_EQ(got, want) << where;
                  ASSERT_EQ(Bits(got_values), Bits(want_values)) << where;
                  ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;
                  ASSERT_EQ(Bits(sum_got), Bits(sum_want)) << where;
                  ASSERT_EQ(got_non_finite, want_non_finite) << where;
                  if (!in_place) {
                    ASSERT_EQ(Bits(r_got), Bits(r_before)) << where;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// The portable kernel's non-finite report is that of its sums: set by a
// NaN or infinite sum, whether from the gradient or from an overflow, and
// never cleared.
TEST(CompressKernelsTest, AccumulateAndCollectReportsNonFiniteSums) {
  const float kMax = std::numeric_limits<float>::max();
  const std::vector<float> nan = {1.0f, std::nanf(""), 3.0f};
  const std::vector<float> overflow = {1.0f, kMax, 3.0f};
  for (const KernelTable* t : AllTables()) {
    const auto report = [&](const std::vector<float>& g, bool zero,
                            bool start) {
      std::vector<float> r(g.size(), kMax);
      r[0] = 0.0f;
      r[2] = 0.0f;
      std::vector<uint32_t> out(g.size());
      std::vector<float> values(g.size());
      bool non_finite = start;
      t->accumulate_and_collect(g.data(), 1.0f, zero, r.data(), r.data(),
                                g.size(), 10.0f, 0, out.data(), values.data(),
                                &non_finite);
      return non_finite;
    };
    const std::vector<float> small = {1.0f, -kMax, 3.0f};
    EXPECT_FALSE(report(small, false, false)) << InstructionSetName(t->isa);
    EXPECT_TRUE(report(small, false, true)) << InstructionSetName(t->isa);
    EXPECT_TRUE(report(nan, false, false)) << InstructionSetName(t->isa);
    EXPECT_TRUE(report(overflow, false, false)) << InstructionSetName(t->isa);
    // kZero takes the NaN as 0: max + 0 is finite.
    EXPECT_FALSE(report(nan, true, false)) << InstructionSetName(t->isa);
  }
}

// The velocity step folded in: the same indices, values, velocities,
// residuals and non-finite report as the portable kernel, on gradients,
// velocities and residuals drawn from every input (so that non-finite
// values meet each of the three).
TEST(CompressKernelsTest, VelocityAccumulateAndCollectMatchesPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        const auto inputs = Inputs(n + offset, n * 29 + offset);
        for (size_t which = 0; which < inputs.size(); ++which) {
          const std::vector<float>& g = inputs[which].second;
          const std::vector<float>& u_before =
              inputs[(which + 1) % inputs.size()].second;
          const std::vector<float>& r_before =
              inputs[(which + 3) % inputs.size()].second;
          for (bool zero : {false, true}) {
            for (float threshold : {0.0f, 0.7f, 1.5f, kInf}) {
              std::vector<float> u_want = u_before, u_got = u_before;
              std::vector<float> r_want = r_before, r_got = r_before;
              std::vector<uint32_t> want(n + 1), got(n + kGuard, kGuardBits);
              std::vector<float> want_values(n + 1);
              std::vector<float> got_values(n + kGuard, kGuardValue);
              bool want_non_finite = false;
              bool got_non_finite = false;
              const size_t nw =
                  PortableKernels().velocity_accumulate_and_collect(
                      g.data() + offset, 0.9f, zero, u_want.data() + offset,
                      r_want.data() + offset, n, threshold, 3, want.data(),
                      want_values.data(), &want_non_finite);
              const size_t ng = t->velocity_accumulate_and_collect(
                  g.data() + offset, 0.9f, zero, u_got.data() + offset,
                  r_got.data() + offset, n, threshold, 3, got.data(),
                  got_values.data(), &got_non_finite);
              const std::string where =
                  Where(*t, inputs[which].first, n, offset);
              ASSERT_TRUE(GuardIntact(got, n) && GuardIntact(got_values, n))
                  << "wrote past room for n: " << where;
              want.resize(nw);
              got.resize(ng);
              want_values.resize(nw);
              got_values.resize(ng);
              ASSERT_EQ(got, want) << where;
              ASSERT_EQ(Bits(got_values), Bits(want_values)) << where;
              ASSERT_EQ(Bits(u_got), Bits(u_want)) << where;
              ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;
              ASSERT_EQ(got_non_finite, want_non_finite) << where;
            }
          }
        }
      }
    }
  }
}

// The portable kernel is the velocity step, then accumulate_and_collect at
// scale 1 on the (sanitised) velocity: the same bits, element by element.
TEST(CompressKernelsTest, VelocityAccumulateIsTheTwoSteps) {
  for (const auto& [name, g] : Inputs(1000, 5)) {
    for (bool zero : {false, true}) {
      std::vector<float> u(g.size()), r(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        u[i] = std::sin(static_cast<float>(i)) * 3.0f;
        r[i] = std::cos(static_cast<float>(i)) * 0.5f;
      }
      std::vector<float> u_two = u, r_two = r;
      for (size_t i = 0; i < g.size(); ++i) {
        const float product = 0.9f * u_two[i];
        u_two[i] = product + ((zero && !std::isfinite(g[i])) ? 0.0f : g[i]);
      }
      std::vector<uint32_t> two_indices(g.size()), fused_indices(g.size());
      std::vector<float> two_values(g.size()), fused_values(g.size());
      bool two_non_finite = false, fused_non_finite = false;
      const size_t two = PortableKernels().accumulate_and_collect(
          u_two.data(), 1.0f, zero, r_two.data(), r_two.data(), g.size(), 1.0f,
          0, two_indices.data(), two_values.data(), &two_non_finite);
      const size_t fused = PortableKernels().velocity_accumulate_and_collect(
          g.data(), 0.9f, zero, u.data(), r.data(), g.size(), 1.0f, 0,
          fused_indices.data(), fused_values.data(), &fused_non_finite);
      ASSERT_EQ(fused, two) << name;
      two_indices.resize(two);
      fused_indices.resize(fused);
      two_values.resize(two);
      fused_values.resize(fused);
      EXPECT_EQ(fused_indices, two_indices) << name;
      EXPECT_EQ(Bits(fused_values), Bits(two_values)) << name;
      EXPECT_EQ(Bits(u), Bits(u_two)) << name;
      EXPECT_EQ(Bits(r), Bits(r_two)) << name;
      EXPECT_EQ(fused_non_finite, two_non_finite) << name;
    }
  }
}

TEST(CompressKernelsTest, CollectAtLeastMatchesPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, x] : Inputs(n + offset, n * 17 + offset)) {
          for (float threshold : {0.0f, 0.5f, 1.0f, 2.5f, kInf}) {
            std::vector<uint32_t> want(n + 1), got(n + kGuard, kGuardBits);
            want.resize(PortableKernels().collect_at_least(
                x.data() + offset, n, threshold, 3, want.data()));
            const size_t ng = t->collect_at_least(x.data() + offset, n,
                                                  threshold, 3, got.data());
            ASSERT_TRUE(GuardIntact(got, n))
                << "wrote past room for n: " << Where(*t, name, n, offset);
            got.resize(ng);
            ASSERT_EQ(got, want) << Where(*t, name, n, offset);
          }
        }
      }
    }
  }
}

TEST(CompressKernelsTest, DifferenceAndCollectMatchesPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        const auto as = Inputs(n + offset, n * 13 + offset);
        const auto bs = Inputs(n + offset, n * 29 + offset + 1);
        for (size_t which = 0; which < as.size(); ++which) {
          const std::string& name = as[which].first;
          const std::vector<float>& a = as[which].second;
          // Against an unrelated input of the same kind, and against a
          // copy of itself (every difference zero, or NaN where a is not
          // finite).
          for (const std::vector<float>* b : {&bs[which].second, &a}) {
            for (float threshold : {0.0f, 0.7f, 1.5f, kInf, kNaN}) {
              std::vector<uint32_t> want(n + 1), got(n + kGuard, kGuardBits);
              std::vector<float> want_values(n + 1);
              std::vector<float> got_values(n + kGuard, kGuardValue);
              const size_t nw = PortableKernels().difference_and_collect(
                  a.data() + offset, b->data() + offset, n, threshold, 5,
                  want.data(), want_values.data());
              const size_t ng = t->difference_and_collect(
                  a.data() + offset, b->data() + offset, n, threshold, 5,
                  got.data(), got_values.data());
              ASSERT_TRUE(GuardIntact(got, n) && GuardIntact(got_values, n))
                  << "wrote past room for n: " << Where(*t, name, n, offset);
              want.resize(nw);
              got.resize(ng);
              want_values.resize(nw);
              got_values.resize(ng);
              ASSERT_EQ(got, want) << Where(*t, name, n, offset);
              ASSERT_EQ(Bits(got_values), Bits(want_values))
                  << Where(*t, name, n, offset);
            }
          }
        }
      }
    }
  }
}

// The portable version itself against the contract, element by element:
// every index whose difference is not below the threshold, NaN included.
TEST(CompressKernelsTest, DifferenceAndCollectKeepsEveryNaN) {
  const std::vector<float> a = {1.0f, kNaN, 3.0f, kInf, -kInf, 0.5f, 2.0f};
  const std::vector<float> b = {0.0f, 0.0f, kNaN, kInf, 1.0f, 0.0f, -1.0f};
  std::vector<uint32_t> out(a.size());
  std::vector<float> values(a.size());
  for (const KernelTable* t : AllTables()) {
    const size_t count = t->difference_and_collect(
        a.data(), b.data(), a.size(), 1.0f, 100, out.data(), values.data());
    out.resize(count);
    // 1 - 0 = 1 reaches 1; NaN, NaN, inf - inf = NaN, -inf, 3 all count;
    // 0.5 does not.
    EXPECT_EQ(out, (std::vector<uint32_t>{100, 101, 102, 103, 104, 106}))
        << InstructionSetName(t->isa);
    out.resize(a.size());
  }
}

// One NaN or infinity anywhere, in the vector body or the tail, is seen by
// every version; finite inputs (subnormals and the largest floats among
// them) are not refused.
TEST(CompressKernelsTest, AllFiniteFindsEveryNonFiniteElement) {
  std::vector<const KernelTable*> tables = VectorTables();
  tables.push_back(&PortableKernels());
  for (const KernelTable* t : tables) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, x] : Inputs(n + offset, n * 19 + offset)) {
          bool want = true;
          for (size_t i = offset; i < x.size(); ++i) {
            want = want && std::isfinite(x[i]);
          }
          ASSERT_EQ(t->all_finite(x.data() + offset, n), want)
              << Where(*t, name, n, offset);
        }
        std::vector<float> x(n + offset, 3.4e38f);
        ASSERT_TRUE(t->all_finite(x.data() + offset, n));
        for (size_t at = 0; at < n; at += std::max<size_t>(1, n / 37)) {
          for (float bad : {kInf, -kInf, kNaN}) {
            x[offset + at] = bad;
            ASSERT_FALSE(t->all_finite(x.data() + offset, n))
                << Where(*t, "one non-finite", n, offset) << " at " << at;
            x[offset + at] = -1e-40f;
          }
        }
      }
    }
  }
}

// Dense rounding, with and without error feedback, at every precision.
void CheckDense(const KernelTable& t, size_t n, size_t offset) {
  for (const auto& [name, g] : Inputs(n + offset, n * 13 + offset)) {
    for (bool zero : {false, true}) {
      for (ValuePrecision p : {ValuePrecision::kFp32, ValuePrecision::kFp16,
                               ValuePrecision::kBf16}) {
        const std::string where = Where(t, name, n, offset) + ", " +
                                  std::string(PrecisionName(p)) +
                                  (zero ? ", zeroing" : "");
        // A residual with zeros, leftovers and (for "non-finite") a NaN.
        std::vector<float> r_want(n + offset);
        for (size_t i = 0; i < r_want.size(); ++i) {
          r_want[i] = i % 3 == 0 ? 0.0f : g[(i * 7) % g.size()] * 1e-3f;
        }
        std::vector<float> r_got = r_want;
        std::vector<float> want(n + offset), got(n + offset);
        const bool finite_want = PortableKernels().dense_feedback(
            g.data() + offset, zero, p, r_want.data() + offset, n,
            want.data() + offset);
        const bool finite_got =
            t.dense_feedback(g.data() + offset, zero, p, r_got.data() + offset,
                             n, got.data() + offset);
        ASSERT_EQ(finite_got, finite_want) << where;
        ASSERT_EQ(Bits(got), Bits(want)) << where;
        ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;

        std::fill(want.begin(), want.end(), 0.0f);
        std::fill(got.begin(), got.end(), 0.0f);
        PortableKernels().round_dense(g.data() + offset, zero, p, n,
                                      want.data() + offset);
        t.round_dense(g.data() + offset, zero, p, n, got.data() + offset);
        ASSERT_EQ(Bits(got), Bits(want)) << where;
      }
    }
  }
}

TEST(CompressKernelsTest, DenseMatchesPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) CheckDense(*t, n, offset);
    }
  }
}

TEST(CompressKernelsTest, StreamingDenseMatchesPortable) {
  // Past the size at which outputs bypass the caches.
  for (const KernelTable* t : VectorTables()) {
    CheckDense(*t, (size_t{9} << 20) / sizeof(float) + 13, 5);
  }
}

TEST(CompressKernelsTest, SignBitsAndSumsMatchPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, x] : Inputs(n + offset, n * 5 + offset)) {
          for (bool zero : {false, true}) {
            const size_t words = (n + 63) / 64;
            std::vector<uint64_t> want(words, ~0ull), got(words, 0);
            double lanes_want[kSumLanes] = {}, lanes_got[kSumLanes] = {};
            PortableKernels().sign_bits(x.data() + offset, zero, n, want.data(),
                                        lanes_want);
            t->sign_bits(x.data() + offset, zero, n, got.data(), lanes_got);
            ASSERT_EQ(got, want) << Where(*t, name, n, offset);
            ASSERT_EQ(0, std::memcmp(lanes_got, lanes_want, sizeof lanes_got))
                << Where(*t, name, n, offset);

            // A sum over a NaN may carry another payload (kernels.h).
            if (name == "non-finite" && !zero) continue;
            double squares_want[kSumLanes] = {}, squares_got[kSumLanes] = {};
            PortableKernels().sum_squares(x.data() + offset, zero, n,
                                          squares_want);
            t->sum_squares(x.data() + offset, zero, n, squares_got);
            ASSERT_EQ(
                0, std::memcmp(squares_got, squares_want, sizeof squares_got))
                << Where(*t, name, n, offset);
          }
        }
      }
    }
  }
}

TEST(CompressKernelsTest, QsgdLevelsMatchPortable) {
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, x] : Inputs(n + offset, n * 3 + offset)) {
          for (bool zero : {false, true}) {
            // Only finite input reaches the kernel (kernels.h).
            if (name == "non-finite" && !zero) continue;
            for (float s : {1.0f, 7.0f, 256.0f, 65535.0f}) {
              // A norm-sized scale, and one that saturates every level.
              for (double to_levels : {s / 3.0, 1e30}) {
                const size_t words = (n + 63) / 64;
                std::vector<uint16_t> want(n, 1), got(n, 2);
                std::vector<uint64_t> want_bits(words, ~0ull),
                    got_bits(words, 0);
                const uint64_t seed = 0x1234567ull * (n + 1);
                PortableKernels().qsgd_levels(x.data() + offset, zero, n,
                                              to_levels, s, seed, want.data(),
                                              want_bits.data());
                t->qsgd_levels(x.data() + offset, zero, n, to_levels, s, seed,
                               got.data(), got_bits.data());
                ASSERT_EQ(got, want) << Where(*t, name, n, offset);
                ASSERT_EQ(got_bits, want_bits) << Where(*t, name, n, offset);
              }
            }
          }
        }
      }
    }
  }
}

// The error-feedback passes of 1-bit sign and QSGD, on a residual that
// holds leftovers and zeros.
TEST(CompressKernelsTest, QuantizerFeedbackMatchesPortable) {
  const KernelTable& portable = PortableKernels();
  for (const KernelTable* t : VectorTables()) {
    for (size_t n : kLengths) {
      for (size_t offset : kOffsets) {
        for (const auto& [name, g] : Inputs(n + offset, n * 11 + offset)) {
          for (bool zero : {false, true}) {
            // Sums over a NaN and QSGD's levels need finite input.
            if (name == "non-finite" && !zero) continue;
            const std::string where = Where(*t, name, n, offset);
            std::vector<float> r0(n + offset);
            for (size_t i = 0; i < r0.size(); ++i) {
              r0[i] = i % 4 == 0 ? 0.0f : 0.01f * static_cast<float>(i % 7);
            }
            const size_t words = (n + 63) / 64;

            std::vector<float> r_want = r0, r_got = r0;
            std::vector<uint64_t> bits_want(words, ~0ull), bits_got(words, 0);
            double lanes_want[kSumLanes] = {}, lanes_got[kSumLanes] = {};
            const bool f_want = portable.accumulate_sign(
                g.data() + offset, zero, r_want.data() + offset, n,
                bits_want.data(), lanes_want);
            const bool f_got = t->accumulate_sign(g.data() + offset, zero,
                                                  r_got.data() + offset, n,
                                                  bits_got.data(), lanes_got);
            ASSERT_EQ(f_got, f_want) << where;
            ASSERT_EQ(bits_got, bits_want) << where;
            ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;
            ASSERT_EQ(0, std::memcmp(lanes_got, lanes_want, sizeof lanes_got))
                << where;
            portable.subtract_sign(bits_want.data(), 0.75f,
                                   r_want.data() + offset, n);
            t->subtract_sign(bits_want.data(), 0.75f, r_got.data() + offset, n);
            ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;

            r_want = r0;
            r_got = r0;
            double sq_want[kSumLanes] = {}, sq_got[kSumLanes] = {};
            ASSERT_EQ(
                t->accumulate_squares(g.data() + offset, zero,
                                      r_got.data() + offset, n, sq_got),
                portable.accumulate_squares(g.data() + offset, zero,
                                            r_want.data() + offset, n, sq_want))
                << where;
            ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;
            ASSERT_EQ(0, std::memcmp(sq_got, sq_want, sizeof sq_got)) << where;
            for (float s : {1.0f, 255.0f}) {
              std::vector<uint16_t> levels_want(n, 1), levels_got(n, 2);
              std::vector<uint64_t> neg_want(words, ~0ull), neg_got(words, 0);
              portable.qsgd_feedback(r_want.data() + offset, zero, n, s / 4.0,
                                     s, 4.0f, 99, levels_want.data(),
                                     neg_want.data());
              t->qsgd_feedback(r_got.data() + offset, zero, n, s / 4.0, s, 4.0f,
                               99, levels_got.data(), neg_got.data());
              ASSERT_EQ(levels_got, levels_want) << where;
              ASSERT_EQ(neg_got, neg_want) << where;
              ASSERT_EQ(Bits(r_got), Bits(r_want)) << where;
            }
          }
        }
      }
    }
  }
}

// Every finite half (all 63,488 bit patterns whose exponent is not all
// ones), little-endian at every byte offset: each version converts it to
// the float of the same value, as the portable one does.
TEST(CompressKernelsTest, HalfToFloatIsExactForEveryFiniteHalf) {
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00u) != 0x7c00u) halves.push_back(static_cast<uint16_t>(h));
  }
  std::vector<uint8_t> bytes(2 * halves.size() + 1);
  for (size_t offset : {0, 1}) {
    for (size_t i = 0; i < halves.size(); ++i) {
      bytes[offset + 2 * i] = static_cast<uint8_t>(halves[i]);
      bytes[offset + 2 * i + 1] = static_cast<uint8_t>(halves[i] >> 8);
    }
    std::vector<float> expected(halves.size());
    PortableKernels().half_to_float(bytes.data() + offset, halves.size(),
                                    expected.data());
    for (size_t i = 0; i < halves.size(); ++i) {
      ASSERT_EQ(expected[i], HalfBitsToFloat(halves[i])) << "half " << i;
    }
    for (const KernelTable* t : VectorTables()) {
      for (size_t n : {halves.size(), size_t{0}, size_t{7}, size_t{17}}) {
        std::vector<float> out(n);
        t->half_to_float(bytes.data() + offset, n, out.data());
        std::vector<float> prefix(expected.begin(), expected.begin() + n);
        EXPECT_EQ(Bits(out), Bits(prefix))
            << InstructionSetName(t->isa) << ", n " << n << ", offset "
            << offset;
      }
    }
  }
}

// Floats that exercise every rounding case of binary16: every half, the
// midpoints between neighbouring halves (ties to even) and a float either
// side of each, the saturation edge, float subnormals, random values over
// the whole exponent range, and NaN and infinities among them.
std::vector<float> HalfRoundingCases() {
  std::vector<float> cases;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float low = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float high = HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    const float middle = low + (high - low) / 2;  // exact in float
    for (float v : {low, middle, std::nextafter(middle, 0.0f),
                    std::nextafter(middle, 1e9f)}) {
      cases.push_back(v);
      cases.push_back(-v);
    }
  }
  for (float v : {65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e10f,
                  std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), 1e-40f}) {
    cases.push_back(v);
    cases.push_back(-v);
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    float v;
    const uint32_t b = bits(rng);
    std::memcpy(&v, &b, sizeof v);
    cases.push_back(v);  // NaNs and infinities included
  }
  cases.push_back(std::numeric_limits<float>::infinity());
  cases.push_back(-std::numeric_limits<float>::quiet_NaN());
  return cases;
}

// Every version writes FloatToHalfBits' bits, at any output offset.
TEST(CompressKernelsTest, FloatToHalfMatchesTheScalarRounding) {
  const std::vector<float> cases = HalfRoundingCases();
  std::vector<uint8_t> expected(2 * cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const uint16_t h = FloatToHalfBits(cases[i]);
    expected[2 * i] = static_cast<uint8_t>(h);
    expected[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::vector<const KernelTable*> tables = VectorTables();
  tables.push_back(&PortableKernels());
  for (const KernelTable* t : tables) {
    for (size_t offset : {0, 1}) {
      for (size_t n : {cases.size(), size_t{0}, size_t{7}, size_t{17}}) {
        std::vector<uint8_t> out(2 * n + offset, 0xaa);
        t->float_to_half(cases.data(), n, out.data() + offset);
        ASSERT_TRUE(
            std::equal(out.begin() + offset, out.end(), expected.begin()))
            << InstructionSetName(t->isa) << ", n " << n << ", offset "
            << offset;
      }
    }
  }
}

TEST(CompressKernelsTest, LanesCombineInAFixedOrder) {
  double lanes[kSumLanes];
  for (size_t i = 0; i < kSumLanes; ++i) lanes[i] = static_cast<double>(i + 1);
  EXPECT_EQ(CombineLanes(lanes), 136.0);
  // Pairwise, lane i with lane i + 8 first: the fourteen ones meet 2^53
  // only in pairs or more, and survive (2^53 + 1 would round back to 2^53,
  // so a sequential sum returns 2^53).
  for (size_t i = 0; i < kSumLanes; ++i) lanes[i] = 1.0;
  lanes[0] = 9007199254740992.0;  // 2^53
  lanes[8] = 0.0;
  EXPECT_EQ(CombineLanes(lanes), 9007199254740992.0 + 14.0);
}

}  // namespace
}  // namespace gradwire::compress_kernels
