// Random-K: positions drawn from a seed both sides know, so only values
// travel.
#include "common/compress/builtin.h"
#include "common/compress/random_index_set.h"
#include "common/compress/sparsifier.h"

namespace gradwire {
namespace {

class RandomKCompressor final : public Sparsifier {
 public:
  using Sparsifier::Sparsifier;
  absl::string_view name() const override { return "randomk"; }

 protected:
  void Select(absl::Span<const float> x, const CompressContext& ctx,
              CompressedChunk* out) const override {
    out->encoding = Encoding::kRandomK;
    // A fresh draw per chunk and step, identical on every process.
    out->seed = MixSeed(options().seed, ctx.chunk_key, ctx.step);
    out->indices = RandomIndexSet(out->seed, x.size(), TargetCount(x.size()));
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeRandomKCompressor(CompressorOptions options) {
  return std::make_unique<RandomKCompressor>(std::move(options));
}

}  // namespace gradwire
