#include "common/compress/sparsifier.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "common/compress/kernels.h"
#include "common/compress/momentum_correction.h"
#include "common/compress/select.h"

namespace gradwire {
namespace {

// Fills out->values with x at out->indices, rounded to `precision`.
void GatherValues(absl::Span<const float> x, ValuePrecision precision,
                  CompressedChunk* out) {
  out->values.resize(out->indices.size());
  for (size_t j = 0; j < out->indices.size(); ++j) {
    out->values[j] = RoundToPrecision(x[out->indices[j]], precision);
  }
}

void StartChunk(uint64_t numel, ValuePrecision precision,
                CompressedChunk* out) {
  out->Clear();
  out->numel = numel;
  out->precision = precision;
}

}  // namespace

absl::Status Sparsifier::Compress(absl::Span<const float> input,
                                  const CompressContext& ctx,
                                  CompressedChunk* out) const {
  if (absl::Status s = CheckFinite(input, ctx); !s.ok()) return s;
  std::vector<float> sanitized;
  if (zero_non_finite() && !AllFinite(input)) {
    // Rare path: copy only when a non-finite element is really there.
    sanitized.resize(input.size());
    for (size_t i = 0; i < input.size(); ++i) {
      sanitized[i] = SanitizeValue(input[i], NonFinitePolicy::kZero);
    }
    input = sanitized;
  }
  StartChunk(input.size(), options().precision, out);
  Select(input, ctx, out);
  GatherValues(input, options().precision, out);
  return absl::OkStatus();
}

absl::Status Sparsifier::CompressDifference(absl::Span<const float> a,
                                            absl::Span<const float> b,
                                            const CompressContext& ctx,
                                            CompressedChunk* out) const {
  StartChunk(a.size(), options().precision, out);
  if (!SelectDifference(a, b, ctx, out)) {
    return Compressor::CompressDifference(a, b, ctx, out);
  }
  // Every value is a finite difference (SelectDifference's promise).
  compress_kernels::Kernels().round_dense(
      out->values.data(), /*zero_non_finite=*/false, options().precision,
      out->values.size(), out->values.data());
  return absl::OkStatus();
}

absl::Status Sparsifier::CompressWithFeedback(absl::Span<const float> gradient,
                                              const CompressContext& ctx,
                                              FeedbackState* state,
                                              CompressedChunk* out) const {
  if (!TestsInPass(gradient.size(), ctx, *state)) {
    if (absl::Status s = CheckFinite(gradient, ctx); !s.ok()) return s;
  }
  state->Resize(gradient.size(), UsesVelocity());
  StartChunk(gradient.size(), options().precision, out);
  if (absl::Status s = AccumulateAndSelect(gradient, ctx, state, out);
      !s.ok()) {
    out->Clear();
    return s;
  }
  SubtractSent(state, out);
  return absl::OkStatus();
}

absl::Status Sparsifier::CompressVelocityWithFeedback(
    absl::Span<const float> gradient, float momentum,
    const CompressContext& ctx, std::vector<float>* velocity,
    FeedbackState* state, CompressedChunk* out) const {
  if (!FusesVelocity()) {
    return Compressor::CompressVelocityWithFeedback(gradient, momentum, ctx,
                                                    velocity, state, out);
  }
  if (absl::Status s = CheckVelocityGradient(options().non_finite, gradient);
      !s.ok()) {
    return s;
  }
  const size_t n = gradient.size();
  if (velocity->size() != n) velocity->assign(n, 0.0f);
  state->Resize(n, UsesVelocity());
  StartChunk(n, options().precision, out);
  const bool finite = AccumulateVelocityAndSelect(
      gradient, momentum, ctx, absl::MakeSpan(*velocity), state, out);
  if (!finite && options().non_finite == NonFinitePolicy::kReject) {
    out->Clear();
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the momentum velocity or the error-feedback residual overflowed "
        "to a non-finite value (%d elements); the learning rate or the "
        "gradient scale is too large",
        name(), n));
  }
  SubtractSent(state, out);
  return absl::OkStatus();
}

void Sparsifier::SubtractSent(FeedbackState* state,
                              CompressedChunk* out) const {
  std::vector<float>& r = state->residual;
  if (out->values.size() == out->indices.size()) {
    // In place: each value is read before it is written.
    compress_kernels::Kernels().round_dense(
        out->values.data(), /*zero_non_finite=*/false, options().precision,
        out->values.size(), out->values.data());
  } else {
    GatherValues(r, options().precision, out);
  }
  for (size_t j = 0; j < out->indices.size(); ++j) {
    r[out->indices[j]] -= out->values[j];
  }
}

absl::Status Sparsifier::AccumulateAndSelect(absl::Span<const float> gradient,
                                             const CompressContext& ctx,
                                             FeedbackState* state,
                                             CompressedChunk* out) const {
  // r += g through the vector kernel (a product with 1 is exact, so the
  // bits are those of r[i] + g[i]); the plain loop stayed scalar under
  // GCC's -O2 cost model. Nothing is selected here: only a residual that
  // overflowed to infinity reaches an infinite threshold, and Select
  // chooses afresh.
  thread_local std::vector<uint32_t> unused_indices;
  thread_local std::vector<float> unused_values;
  if (absl::Status s = AddToResidual(gradient, 1.0f, ctx, state,
                                     std::numeric_limits<float>::infinity(),
                                     &unused_indices, &unused_values);
      !s.ok()) {
    return s;
  }
  Select(state->residual, ctx, out);
  return absl::OkStatus();
}

bool Sparsifier::TestsInPass(size_t numel, const CompressContext& ctx,
                             const FeedbackState& state) const {
  return options().non_finite == NonFinitePolicy::kReject &&
         !ctx.input_known_finite && !UsesVelocity() &&
         numel >= state.spare_from;
}

absl::Status Sparsifier::AddToResidual(absl::Span<const float> addend,
                                       float scale, const CompressContext& ctx,
                                       FeedbackState* state, float threshold,
                                       std::vector<uint32_t>* indices,
                                       std::vector<float>* values) const {
  std::vector<float>& r = state->residual;
  if (!TestsInPass(addend.size(), ctx, *state)) {
    select_internal::AccumulateAndCollect(addend, scale, zero_non_finite(), r,
                                          absl::MakeSpan(r), threshold, indices,
                                          values);
    return absl::OkStatus();
  }
  // Allocated once per chunk; a resize that keeps the size is free.
  state->spare.resize(r.size());
  const bool finite = select_internal::AccumulateAndCollect(
      addend, scale, /*zero_non_finite=*/false, r, absl::MakeSpan(state->spare),
      threshold, indices, values);
  // A non-finite gradient element makes its sum non-finite; a sum can also
  // overflow from finite operands, which the contract lets through.
  if (!finite) {
    if (absl::Status s = CheckFinite(addend); !s.ok()) return s;
  }
  r.swap(state->spare);
  return absl::OkStatus();
}

}  // namespace gradwire
