// The compressor interface and its options.
//
// A compressor turns a float span into a CompressedChunk. Compressors work on
// plain float buffers so that workers (through tensor data pointers, without
// copies) and shards (on their own buffers) share the same code. Construct
// them by name through MakeCompressor (registry.h).
#ifndef GRADWIRE_COMMON_COMPRESS_COMPRESSOR_H_
#define GRADWIRE_COMMON_COMPRESS_COMPRESSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/compress/compressed_chunk.h"
#include "common/precision.h"

namespace gradwire {

// What to do with a NaN or infinity in a gradient or on the wire.
enum class NonFinitePolicy {
  // Refuse the input with INVALID_ARGUMENT and change nothing.
  kReject,
  // Treat each non-finite element as zero.
  kZero,
};

// Deep Gradient Compression extras (Lin et al., 2018). Each is optional.
struct DgcOptions {
  // Momentum correction: accumulate velocity u = m*u + g and feed u, not g,
  // into the residual. 0 disables it.
  float momentum = 0.0f;
  // Momentum-factor masking: zero u at the positions that were sent.
  bool momentum_masking = true;
  // Local gradient clipping: scale g so its L2 norm is at most this. 0
  // disables it.
  float clip_norm = 0.0f;
  // Sparsity warm-up: during the first `warmup_epochs` epochs the density
  // decays exponentially from 1 to `ratio` (epoch e < W keeps
  // ratio^((e + 1) / (W + 1))). 0 disables it.
  int warmup_epochs = 0;
  // Fraction of elements sampled to estimate the threshold, in (0, 1].
  double sample_ratio = 0.01;
};

struct CompressorOptions {
  // Registry name: none, fp16, bf16, topk, randomk, threshold, dgc, qsgd,
  // onebit.
  std::string name = "none";
  // Sparsifiers: fraction of elements kept, in (0, 1]. Ignored when k is set.
  double ratio = 0.01;
  // Sparsifiers: absolute number of elements kept (clamped to numel); unset
  // means use `ratio`. 0 sends nothing (everything stays in the residual).
  std::optional<uint64_t> k;
  // Sparsifiers with `ratio`: every chunk keeps at least min(min_kept, numel)
  // elements per call. At low ratios a small tensor (a bias, an output
  // layer) would otherwise keep one element per step and each of its
  // elements would wait ~numel steps between sends; with momentum those
  // delays diverge (docs/convergence.md: DGC 0.1% on the MLP). 1 keeps the
  // plain rule.
  uint64_t min_kept = 1;
  // threshold: keep elements with |x| >= threshold; must be finite, >= 0.
  float threshold = 0.0f;
  // qsgd: number of levels s in [1, 65535].
  uint32_t levels = 256;
  // qsgd: elements that share one norm, a multiple of 64; 0: the whole
  // chunk. The rounding error of an element grows with its bucket's norm /
  // s, so one norm over n elements makes the error ~sqrt(n) / s times the
  // input (QSGD's variance bound): beyond s^2 elements error feedback's
  // residual outgrows what is sent and training diverges (the CNN's 1M-
  // element chunks at s = 256, docs/convergence.md). 512 keeps the error
  // below 0.1 of the input at 256 levels for 4 bytes per 512 elements, the
  // bucket QSGD's authors train with.
  uint32_t qsgd_bucket = 512;
  // onebit: elements that share one scale (their mean magnitude), a
  // multiple of 64; 0: the whole chunk. A chunk spans layers whose
  // gradients differ in scale by orders of magnitude, and one mean sends a
  // small layer's elements at about the large layer's size, which error
  // feedback must then carry. Buckets send each part at its own size, but
  // they also send more in total (sum over buckets of n_b mean_b^2 is at
  // least n mean^2), and with the folded momentum auto picks for onebit
  // (SGD at lr / (1 - m)) the CNN's weights turned non-finite early in its
  // first epoch with buckets, where bucket 0 trains
  // (docs/convergence.md#measured-cnn-3-epochs-one-seed). So 0 stays the
  // default here.
  uint32_t onebit_bucket = 0;
  // Seed of randomk's index draw and qsgd's stochastic rounding, mixed with
  // the chunk key and step of each call.
  uint64_t seed = 0x6772616477697265ull;
  // Precision of the values that will travel. The compressor rounds to it,
  // so error feedback sees exactly what the receiver decodes. fp16/bf16
  // compressors force their own precision.
  ValuePrecision precision = ValuePrecision::kFp32;
  NonFinitePolicy non_finite = NonFinitePolicy::kReject;
  DgcOptions dgc;
};

// The number of elements a sparsifier keeps out of `numel` at `epoch`:
// options.k clamped to numel when set; otherwise round(ratio * numel), with
// ratio raised during DGC's sparsity warm-up, at least
// min(options.min_kept, numel) and at least 1 (0 for an empty chunk).
inline constexpr int kAfterWarmup = 1 << 30;
uint64_t KeptCount(const CompressorOptions& options, uint64_t numel,
                   int epoch = kAfterWarmup);

// Per-call facts that change the result: which chunk, which step, which
// epoch (for warm-up schedules).
struct CompressContext {
  uint64_t chunk_key = 0;
  uint64_t step = 0;
  int epoch = 0;
  // The caller has seen every input value finite while it computed them
  // (AccumulateVelocity does), so that the compressor's own pass over the
  // input under kReject is skipped. Never set it on a guess: a non-finite
  // value would then be compressed.
  bool input_known_finite = false;
};

// Error-feedback state of one chunk, owned by the caller (one per chunk).
struct FeedbackState {
  // Chunks of at least this many elements (2 MiB of floats) get a second
  // residual buffer by default. Against the check pass it is faster in
  // chunks of 1M and 786K, as fast in chunks of 512K, and slower below,
  // where the gradient a check pass reads is still cached for the pass
  // after it and the streaming stores only evict the sum
  // (docs/benchmarks/compress.md#the-finite-check-in-the-accumulating-pass).
  // The worker's default 4 MiB partition cuts a large tensor into
  // near-equal chunks just under 1M.
  static constexpr size_t kSpareFrom = size_t{1} << 19;

  // What was left out of earlier messages; numel elements, zero at start.
  std::vector<float> residual;
  // DGC momentum correction's velocity; empty unless enabled.
  std::vector<float> velocity;
  // For chunks of at least `spare_from` elements, a sparsifier under the
  // kReject policy writes r + g here (numel elements, allocated on first
  // use) and swaps it with `residual` once the sum proved finite: the
  // gradient is tested in the pass that adds it, not in a pass of its own
  // before, which saves a read of every gradient element per call for 4
  // more bytes per element. SIZE_MAX turns it off (the residual is then
  // updated in place after the check pass).
  size_t spare_from = kSpareFrom;
  std::vector<float> spare;

  // Sizes the buffers for `numel` elements, zero-filled, when they are not.
  void Resize(size_t numel, bool with_velocity);
};

// Thread safety: a compressor holds only its options; Compress and
// CompressWithFeedback may be called concurrently on different outputs and
// states.
class Compressor {
 public:
  explicit Compressor(CompressorOptions options)
      : options_(std::move(options)) {}
  virtual ~Compressor() = default;

  // Registry name.
  virtual absl::string_view name() const = 0;

  // Compresses `input` into `*out` (reusing its capacity). Returns
  // INVALID_ARGUMENT for a non-finite input under kReject, leaving `*out`
  // unspecified.
  virtual absl::Status Compress(absl::Span<const float> input,
                                const CompressContext& ctx,
                                CompressedChunk* out) const = 0;

  // Compresses the element-wise difference a - b (one float subtraction
  // per element; a and b have the same size) exactly as Compress would
  // compress it, with the same result and the same errors. The default
  // writes the difference into a per-thread buffer first; Top-K finds its
  // candidates in the subtracting pass instead. A shard publishes pull
  // deltas this way: its weights against the shadow its workers hold.
  virtual absl::Status CompressDifference(absl::Span<const float> a,
                                          absl::Span<const float> b,
                                          const CompressContext& ctx,
                                          CompressedChunk* out) const;

  // Error feedback: g' = g + r; c = C(g'); r = g' - D(c). On return
  // D(*out) + state->residual equals g' exactly for sparsifiers and within
  // float rounding for quantizers. On error (non-finite `gradient` under
  // kReject) `*state` is unchanged and `*out` is not to be read (it may
  // have been cleared). The default implementation runs the
  // three steps; sparsifiers override it with one fused pass.
  virtual absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                            const CompressContext& ctx,
                                            FeedbackState* state,
                                            CompressedChunk* out) const;

  // The worker's momentum correction, then error feedback on the velocity:
  // u = m * u + g (`velocity` sized and zeroed on first use), then
  // CompressWithFeedback(u). The result is AccumulateVelocity's
  // (momentum_correction.h, without Nesterov) followed by
  // CompressWithFeedback's, bit for bit, and so is a refusal: a non-finite
  // gradient under kReject changes neither `velocity` nor `*state`. Where
  // finite values overflow to a non-finite residual under kReject, the
  // call is refused too (INVALID_ARGUMENT), with both already changed.
  // The default runs the two steps; Top-K fuses them into one pass over
  // memory, which reads the gradient, velocity and residual once each.
  // Masking the velocity (MaskSentVelocity) stays with the caller.
  virtual absl::Status CompressVelocityWithFeedback(
      absl::Span<const float> gradient, float momentum,
      const CompressContext& ctx, std::vector<float>* velocity,
      FeedbackState* state, CompressedChunk* out) const;

  const CompressorOptions& options() const { return options_; }

 protected:
  // KeptCount(options(), numel, epoch).
  uint64_t TargetCount(uint64_t numel, int epoch = kAfterWarmup) const {
    return KeptCount(options_, numel, epoch);
  }

  // Returns INVALID_ARGUMENT naming the first non-finite element of `input`
  // when the policy is kReject and there is one; OK otherwise.
  absl::Status CheckFinite(absl::Span<const float> input) const;
  // The same, OK at once when ctx.input_known_finite.
  absl::Status CheckFinite(absl::Span<const float> input,
                           const CompressContext& ctx) const {
    return ctx.input_known_finite ? absl::OkStatus() : CheckFinite(input);
  }

 private:
  CompressorOptions options_;
};

// True when every element is finite. Vectorised; no early exit.
bool AllFinite(absl::Span<const float> input);

// The value of element `x` under `policy` (0 for non-finite under kZero).
inline float SanitizeValue(float x, NonFinitePolicy policy) {
  return (policy == NonFinitePolicy::kZero && !(x - x == 0.0f)) ? 0.0f : x;
}

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_COMPRESSOR_H_
