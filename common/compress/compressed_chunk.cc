#include "common/compress/compressed_chunk.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "common/vector_clones.h"

namespace gradwire {
namespace {

// `x` negated when `negate` is 1 (the sign bit flipped, which is what -x
// is), without a branch: the sign bits of quantized chunks are random, so a
// branch per element mispredicts half the time.
inline float FlipSignIf(float x, uint32_t negate) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits ^= negate << 31;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

// Element i of a QSGD chunk whose bucket has `norm`: the one formula every
// decoding uses (the worker subtracted exactly this from its residual).
// Inlined into the vector clones below, so that each is built for its
// width.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline float QsgdElement(const uint16_t* levels,
                                                      const uint64_t* negative,
                                                      float norm,
                                                      float num_levels,
                                                      uint64_t i) {
  // level / s <= 1 first, so a norm near FLT_MAX cannot overflow.
  const float magnitude = norm * (static_cast<float>(levels[i]) / num_levels);
  return FlipSignIf(magnitude,
                    static_cast<uint32_t>((negative[i >> 6] >> (i & 63)) & 1u));
}

// Element i of a sign chunk whose bucket has `scale`.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline float SignElement(const uint64_t* positive,
                                                      float scale, uint64_t i) {
  return FlipSignIf(
      scale, static_cast<uint32_t>(~(positive[i >> 6] >> (i & 63)) & 1u));
}

// Calls each(scale, begin, end) for each bucket of a QSGD or sign chunk;
// `whole` is the scale of a chunk without buckets.
template <typename Each>
void ForEachBucket(const CompressedChunk& c, float whole, Each&& each) {
  if (c.bucket_size == 0) return each(whole, 0, c.numel);
  for (uint64_t b = 0; b < c.bucket_scales.size(); ++b) {
    const uint64_t begin = b * c.bucket_size;
    each(c.bucket_scales[b], begin,
         std::min<uint64_t>(c.numel, begin + c.bucket_size));
  }
}

// Calls f(index, value) for every element the chunk carries.
template <typename F>
void ForEachElement(const CompressedChunk& c, F&& f) {
  switch (c.encoding) {
    case Encoding::kDense: {
      // The values through a local pointer: a store through f could
      // otherwise be the vector's own pointer, reloaded every element,
      // and the loop would not vectorise.
      const float* values = c.values.data();
      const uint64_t numel = c.numel;
      for (uint64_t i = 0; i < numel; ++i) f(i, values[i]);
      return;
    }
    case Encoding::kSparse:
    case Encoding::kRandomK:
      for (size_t j = 0; j < c.indices.size(); ++j)
        f(c.indices[j], c.values[j]);
      return;
    case Encoding::kQsgd: {
      const float num_levels = static_cast<float>(c.num_levels);
      ForEachBucket(c, c.norm, [&](float norm, uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
          f(i, QsgdElement(c.levels.data(), c.negative_bits.data(), norm,
                           num_levels, i));
        }
      });
      return;
    }
    case Encoding::kSign:
      ForEachBucket(c, c.scale, [&](float scale, uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
          f(i, SignElement(c.positive_bits.data(), scale, i));
        }
      });
      return;
  }
}

// Sparse updates at sorted indices miss the cache about once per element
// (a 1% chunk touches one cache line in 25 or so); prefetching this many
// elements ahead keeps that many misses in flight instead of one.
constexpr size_t kPrefetchAhead = 16;

// op(target[indices[j]], values[j]) for every selected element of a sparse
// or Random-K chunk, in order.
template <typename Op>
void ForEachSelected(const CompressedChunk& c, float* target, Op&& op) {
  const uint32_t* indices = c.indices.data();
  const float* values = c.values.data();
  const size_t n = c.indices.size();
  for (size_t j = 0; j < n; ++j) {
    if (j + kPrefetchAhead < n) {
      __builtin_prefetch(target + indices[j + kPrefetchAhead], 1);
    }
    op(target[indices[j]], values[j]);
  }
}

bool IsSparse(const CompressedChunk& c) {
  return c.encoding == Encoding::kSparse || c.encoding == Encoding::kRandomK;
}

}  // namespace

uint64_t CompressedChunk::SelectedCount() const {
  if (encoding == Encoding::kSparse || encoding == Encoding::kRandomK) {
    return values.size();
  }
  return numel;
}

void CompressedChunk::Clear() {
  encoding = Encoding::kDense;
  numel = 0;
  precision = ValuePrecision::kFp32;
  values.clear();
  max_magnitude = std::numeric_limits<float>::infinity();
  indices.clear();
  seed = 0;
  norm = 0.0f;
  bucket_size = 0;
  bucket_scales.clear();
  num_levels = 0;
  levels.clear();
  negative_bits.clear();
  scale = 0.0f;
  positive_bits.clear();
}

namespace {

// One bucket of a quantized chunk, elements [begin, end), decoded into `out`
// (Into) or added to a step's sum at `weight` (Add; 1 * v is v exactly, so
// one formula serves every weight), in wide vectors where the CPU has them
// (common/vector_clones.h; element-wise: the same bits in every clone). A
// shard decodes every QSGD and 1-bit push this way.
GRADWIRE_VECTOR_CLONES void QsgdBucketInto(const uint16_t* levels,
                                           const uint64_t* negative, float norm,
                                           float num_levels, uint64_t begin,
                                           uint64_t end, float* out) {
  for (uint64_t i = begin; i < end; ++i) {
    out[i] = QsgdElement(levels, negative, norm, num_levels, i);
  }
}

GRADWIRE_VECTOR_CLONES void QsgdBucketAdd(const uint16_t* levels,
                                          const uint64_t* negative, float norm,
                                          float num_levels, float weight,
                                          uint64_t begin, uint64_t end,
                                          float* sum) {
  for (uint64_t i = begin; i < end; ++i) {
    sum[i] += weight * QsgdElement(levels, negative, norm, num_levels, i);
  }
}

GRADWIRE_VECTOR_CLONES void SignBucketInto(const uint64_t* positive,
                                           float scale, uint64_t begin,
                                           uint64_t end, float* out) {
  for (uint64_t i = begin; i < end; ++i) {
    out[i] = SignElement(positive, scale, i);
  }
}

GRADWIRE_VECTOR_CLONES void SignBucketAdd(const uint64_t* positive, float scale,
                                          float weight, uint64_t begin,
                                          uint64_t end, float* sum) {
  for (uint64_t i = begin; i < end; ++i) {
    sum[i] += weight * SignElement(positive, scale, i);
  }
}

}  // namespace

void DecompressInto(const CompressedChunk& chunk, absl::Span<float> out) {
  float* target = out.data();
  switch (chunk.encoding) {
    case Encoding::kQsgd:
      return ForEachBucket(
          chunk, chunk.norm, [&](float norm, uint64_t begin, uint64_t end) {
            QsgdBucketInto(chunk.levels.data(), chunk.negative_bits.data(),
                           norm, static_cast<float>(chunk.num_levels), begin,
                           end, target);
          });
    case Encoding::kSign:
      return ForEachBucket(chunk, chunk.scale,
                           [&](float scale, uint64_t begin, uint64_t end) {
                             SignBucketInto(chunk.positive_bits.data(), scale,
                                            begin, end, target);
                           });
    case Encoding::kSparse:
    case Encoding::kRandomK:
      std::fill(out.begin(), out.end(), 0.0f);
      break;
    case Encoding::kDense:
      break;
  }
  ForEachElement(chunk, [target](uint64_t i, float v) { target[i] = v; });
}

namespace {

// A dense chunk into a step's sum, in wide vectors where the CPU has them:
// element-wise, the same bits in every clone.
GRADWIRE_VECTOR_CLONES void AddDense(const float* values, float weight,
                                     size_t n, float* sum) {
  if (weight == 1.0f) {
    for (size_t i = 0; i < n; ++i) sum[i] += values[i];
  } else {
    for (size_t i = 0; i < n; ++i) sum[i] += weight * values[i];
  }
}

}  // namespace

void AccumulateInto(const CompressedChunk& chunk, float weight,
                    absl::Span<float> accumulator) {
  if (chunk.encoding == Encoding::kDense) {
    return AddDense(chunk.values.data(), weight, chunk.numel,
                    accumulator.data());
  }
  if (IsSparse(chunk)) {
    if (weight == 1.0f) {
      ForEachSelected(chunk, accumulator.data(),
                      [](float& a, float v) { a += v; });
    } else {
      ForEachSelected(chunk, accumulator.data(),
                      [weight](float& a, float v) { a += weight * v; });
    }
    return;
  }
  float* sum = accumulator.data();
  if (chunk.encoding == Encoding::kQsgd) {
    return ForEachBucket(
        chunk, chunk.norm, [&](float norm, uint64_t begin, uint64_t end) {
          QsgdBucketAdd(chunk.levels.data(), chunk.negative_bits.data(), norm,
                        static_cast<float>(chunk.num_levels), weight, begin,
                        end, sum);
        });
  }
  if (chunk.encoding == Encoding::kSign) {
    return ForEachBucket(chunk, chunk.scale,
                         [&](float scale, uint64_t begin, uint64_t end) {
                           SignBucketAdd(chunk.positive_bits.data(), scale,
                                         weight, begin, end, sum);
                         });
  }
  if (weight == 1.0f) {
    ForEachElement(chunk, [sum](uint64_t i, float v) { sum[i] += v; });
  } else {
    ForEachElement(
        chunk, [sum, weight](uint64_t i, float v) { sum[i] += weight * v; });
  }
}

void SubtractFrom(const CompressedChunk& chunk, absl::Span<float> residual) {
  if (IsSparse(chunk)) {
    ForEachSelected(chunk, residual.data(), [](float& r, float v) { r -= v; });
    return;
  }
  float* target = residual.data();
  ForEachElement(chunk, [target](uint64_t i, float v) { target[i] -= v; });
}

namespace {
template <typename... Args>
absl::Status Malformed(const absl::FormatSpec<Args...>& format,
                       const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// The bucket scales of a QSGD or sign chunk: none without buckets.
absl::Status CheckBuckets(const CompressedChunk& c) {
  const uint64_t wanted =
      c.bucket_size == 0 ? 0 : BucketCount(c.numel, c.bucket_size);
  if (c.bucket_scales.size() != wanted) {
    return Malformed("chunk has %d bucket scales for numel %d in buckets of %d",
                     c.bucket_scales.size(), c.numel, c.bucket_size);
  }
  return absl::OkStatus();
}
}  // namespace

namespace {

// Element-wise, so every clone gives the same bits (common/vector_clones.h).
GRADWIRE_VECTOR_CLONES void SubtractLoop(const float* a, const float* b,
                                         size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

}  // namespace

void SubtractInto(absl::Span<const float> a, absl::Span<const float> b,
                  absl::Span<float> out) {
  SubtractLoop(a.data(), b.data(), out.size(), out.data());
}

absl::Status CheckWellFormed(const CompressedChunk& c) {
  switch (c.encoding) {
    case Encoding::kDense:
      if (c.values.size() != c.numel) {
        return Malformed("dense chunk has %d values for numel %d",
                         c.values.size(), c.numel);
      }
      return absl::OkStatus();
    case Encoding::kSparse:
    case Encoding::kRandomK:
      if (c.indices.size() != c.values.size()) {
        return Malformed("sparse chunk has %d indices but %d values",
                         c.indices.size(), c.values.size());
      }
      for (size_t j = 0; j < c.indices.size(); ++j) {
        if (c.indices[j] >= c.numel) {
          return Malformed("index %d at position %d is out of range [0, %d)",
                           c.indices[j], j, c.numel);
        }
        if (j > 0 && c.indices[j] <= c.indices[j - 1]) {
          return Malformed("index %d at position %d does not increase",
                           c.indices[j], j);
        }
      }
      return absl::OkStatus();
    case Encoding::kQsgd:
      if (c.num_levels == 0 || c.levels.size() != c.numel ||
          c.negative_bits.size() != BitWords(c.numel)) {
        return Malformed("qsgd chunk sizes do not match numel %d", c.numel);
      }
      for (size_t i = 0; i < c.levels.size(); ++i) {
        if (c.levels[i] > c.num_levels) {
          return Malformed("qsgd level %d at %d exceeds %d", c.levels[i], i,
                           c.num_levels);
        }
      }
      return CheckBuckets(c);
    case Encoding::kSign:
      if (c.positive_bits.size() != BitWords(c.numel)) {
        return Malformed("sign chunk has %d words for numel %d",
                         c.positive_bits.size(), c.numel);
      }
      return CheckBuckets(c);
  }
  return Malformed("unknown encoding");
}

}  // namespace gradwire
