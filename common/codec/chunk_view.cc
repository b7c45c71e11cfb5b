#include "common/codec/chunk_view.h"

#include <algorithm>
#include <cstring>

namespace gradwire {

void WireBytes::Append(absl::string_view piece) {
  if (piece.empty()) return;
  if (size_ == 0) {
    single_ = piece;
  } else {
    if (many_.empty()) many_.push_back(single_);
    many_.push_back(piece);
  }
  size_ += piece.size();
}

void WireBytes::Clear() {
  single_ = absl::string_view();
  many_.clear();
  size_ = 0;
}

absl::string_view WireBytes::Flatten(std::string* scratch) const {
  if (many_.empty()) return single_;
  scratch->resize(size_);
  CopyOut(0, size_, &(*scratch)[0]);
  return *scratch;
}

void WireBytes::CopyOut(size_t offset, size_t n, void* dst) const {
  char* out = static_cast<char*>(dst);
  for (absl::string_view piece : pieces()) {
    if (n == 0) return;
    if (offset >= piece.size()) {
      offset -= piece.size();
      continue;
    }
    const size_t take = std::min(n, piece.size() - offset);
    std::memcpy(out, piece.data() + offset, take);
    out += take;
    n -= take;
    offset = 0;
  }
}

std::string WireBytes::ToString() const {
  std::string bytes(size_, '\0');
  CopyOut(0, size_, &bytes[0]);
  return bytes;
}

bool operator==(const WireBytes& a, const WireBytes& b) {
  if (a.size() != b.size()) return false;
  std::string scratch_a;
  std::string scratch_b;
  return a.Flatten(&scratch_a) == b.Flatten(&scratch_b);
}

void ChunkDataView::SetPayload(v1::ChunkData::PayloadCase which) {
  if (payload == which) return;
  payload = which;
  if (which != v1::ChunkData::kDense) dense = DenseValuesView();
  if (which != v1::ChunkData::kSparse) sparse = SparseValuesView();
  if (which != v1::ChunkData::kRandomK) random_k = RandomKValuesView();
  if (which != v1::ChunkData::kQsgd) qsgd = QsgdValuesView();
  if (which != v1::ChunkData::kSign) sign = SignValuesView();
}

ChunkDataView ViewOf(const v1::ChunkData& data) {
  ChunkDataView view;
  view.numel = data.numel();
  view.payload = data.payload_case();
  switch (data.payload_case()) {
    case v1::ChunkData::kDense:
      view.dense.value_type = data.dense().value_type();
      view.dense.values = WireBytes(data.dense().values());
      break;
    case v1::ChunkData::kSparse: {
      const v1::SparseValues& in = data.sparse();
      view.sparse.nnz = in.nnz();
      view.sparse.indices = WireBytes(in.indices());
      view.sparse.value_type = in.value_type();
      view.sparse.values = WireBytes(in.values());
      break;
    }
    case v1::ChunkData::kRandomK: {
      const v1::RandomKValues& in = data.random_k();
      view.random_k.seed = in.seed();
      view.random_k.k = in.k();
      view.random_k.value_type = in.value_type();
      view.random_k.values = WireBytes(in.values());
      break;
    }
    case v1::ChunkData::kQsgd: {
      const v1::QsgdValues& in = data.qsgd();
      view.qsgd.norm = in.norm();
      view.qsgd.levels = in.levels();
      view.qsgd.signs = WireBytes(in.signs());
      view.qsgd.level_codes = WireBytes(in.level_codes());
      view.qsgd.bucket_size = in.bucket_size();
      view.qsgd.bucket_norms = WireBytes(in.bucket_norms());
      break;
    }
    case v1::ChunkData::kSign: {
      const v1::SignValues& in = data.sign();
      view.sign.scale = in.scale();
      view.sign.bits = WireBytes(in.bits());
      view.sign.bucket_size = in.bucket_size();
      view.sign.bucket_scales = WireBytes(in.bucket_scales());
      break;
    }
    case v1::ChunkData::PAYLOAD_NOT_SET:
      break;
  }
  return view;
}

namespace {

// Floats compared by their bits, so that a NaN equals the same NaN.
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

bool operator==(const ChunkDataView& a, const ChunkDataView& b) {
  if (a.numel != b.numel || a.payload != b.payload) return false;
  switch (a.payload) {
    case v1::ChunkData::kDense:
      return a.dense.value_type == b.dense.value_type &&
             a.dense.values == b.dense.values;
    case v1::ChunkData::kSparse:
      return a.sparse.nnz == b.sparse.nnz &&
             a.sparse.indices == b.sparse.indices &&
             a.sparse.value_type == b.sparse.value_type &&
             a.sparse.values == b.sparse.values;
    case v1::ChunkData::kRandomK:
      return a.random_k.seed == b.random_k.seed &&
             a.random_k.k == b.random_k.k &&
             a.random_k.value_type == b.random_k.value_type &&
             a.random_k.values == b.random_k.values;
    case v1::ChunkData::kQsgd:
      return SameBits(a.qsgd.norm, b.qsgd.norm) &&
             a.qsgd.levels == b.qsgd.levels && a.qsgd.signs == b.qsgd.signs &&
             a.qsgd.level_codes == b.qsgd.level_codes &&
             a.qsgd.bucket_size == b.qsgd.bucket_size &&
             a.qsgd.bucket_norms == b.qsgd.bucket_norms;
    case v1::ChunkData::kSign:
      return SameBits(a.sign.scale, b.sign.scale) &&
             a.sign.bits == b.sign.bits &&
             a.sign.bucket_size == b.sign.bucket_size &&
             a.sign.bucket_scales == b.sign.bucket_scales;
    case v1::ChunkData::PAYLOAD_NOT_SET:
      break;
  }
  return true;
}

}  // namespace gradwire
