// ParsePushRequest against protobuf's own parser: the same bytes, split into
// pieces anywhere, give the same fields or are refused by both; and chunks
// decoded from a view equal chunks decoded from the parsed message.
#include "common/codec/push_wire.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/codec.h"
#include "common/compress/random_index_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

// `bytes` cut at `cuts` random places (pieces of one byte included).
WireBytes SplitAnywhere(const std::string& bytes, int cuts,
                        std::mt19937_64& rng) {
  std::vector<size_t> at = {0, bytes.size()};
  if (!bytes.empty()) {
    std::uniform_int_distribution<size_t> where(0, bytes.size());
    for (int i = 0; i < cuts; ++i) at.push_back(where(rng));
  }
  std::sort(at.begin(), at.end());
  WireBytes pieces;
  for (size_t i = 0; i + 1 < at.size(); ++i) {
    pieces.Append(absl::string_view(bytes).substr(at[i], at[i + 1] - at[i]));
  }
  return pieces;
}

// `bytes` in pieces of `size` bytes, as gRPC hands a received message over.
WireBytes SplitEvery(const std::string& bytes, size_t size) {
  WireBytes pieces;
  for (size_t at = 0; at < bytes.size(); at += size) {
    pieces.Append(absl::string_view(bytes).substr(at, size));
  }
  return pieces;
}

std::vector<float> Values(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> values(n);
  for (float& v : values)
    v = RoundToPrecision(dist(rng), ValuePrecision::kFp16);
  return values;
}

// One chunk of every encoding the codec has, `numel` elements each.
std::vector<CompressedChunk> EveryEncoding(uint64_t numel, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<CompressedChunk> chunks;
  for (ValuePrecision precision :
       {ValuePrecision::kFp32, ValuePrecision::kFp16, ValuePrecision::kBf16}) {
    CompressedChunk dense;
    dense.numel = numel;
    dense.precision = precision;
    dense.values = Values(numel, rng);
    for (float& v : dense.values) v = RoundToPrecision(v, precision);
    chunks.push_back(dense);
  }
  CompressedChunk sparse;
  sparse.encoding = Encoding::kSparse;
  sparse.numel = numel;
  for (uint32_t i = 0; i < numel; i += 1 + static_cast<uint32_t>(rng() % 300)) {
    sparse.indices.push_back(i);
  }
  sparse.values = Values(sparse.indices.size(), rng);
  chunks.push_back(sparse);
  CompressedChunk random_k;
  random_k.encoding = Encoding::kRandomK;
  random_k.numel = numel;
  random_k.seed = rng();
  random_k.indices = RandomIndexSet(random_k.seed, numel, numel / 10);
  random_k.values = Values(random_k.indices.size(), rng);
  chunks.push_back(random_k);
  CompressedChunk qsgd;
  qsgd.encoding = Encoding::kQsgd;
  qsgd.numel = numel;
  qsgd.num_levels = 256;
  qsgd.bucket_size = 512;
  for (uint64_t b = 0; b < BucketCount(numel, 512); ++b) {
    qsgd.bucket_scales.push_back(0.5f + static_cast<float>(b));
  }
  for (uint64_t i = 0; i < numel; ++i) {
    qsgd.levels.push_back(static_cast<uint16_t>(rng() % 257));
  }
  qsgd.negative_bits.assign(BitWords(numel), 0);
  for (uint64_t i = 0; i < numel; ++i) {
    if (rng() & 1) qsgd.negative_bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  chunks.push_back(qsgd);
  CompressedChunk sign;
  sign.encoding = Encoding::kSign;
  sign.numel = numel;
  sign.scale = 0.25f;
  sign.positive_bits = qsgd.negative_bits;
  chunks.push_back(sign);
  return chunks;
}

v1::PushRequest PushOf(const std::vector<CompressedChunk>& chunks) {
  v1::PushRequest push;
  push.set_worker_id(3);
  push.set_step(1234567);
  for (size_t i = 0; i < chunks.size(); ++i) {
    v1::ChunkGradient* entry = push.add_chunks();
    entry->set_key(100 + i);
    EXPECT_TRUE(EncodeChunk(chunks[i], entry->mutable_gradient()).ok());
  }
  return push;
}

bool SameChunk(const CompressedChunk& a, const CompressedChunk& b) {
  const auto bits = [](const std::vector<float>& v) {
    std::string s(v.size() * sizeof(float), '\0');
    if (!v.empty()) std::memcpy(&s[0], v.data(), s.size());
    return s;
  };
  return a.encoding == b.encoding && a.numel == b.numel &&
         a.precision == b.precision && bits(a.values) == bits(b.values) &&
         a.indices == b.indices && a.seed == b.seed &&
         a.bucket_size == b.bucket_size &&
         bits(a.bucket_scales) == bits(b.bucket_scales) && a.norm == b.norm &&
         a.num_levels == b.num_levels && a.levels == b.levels &&
         a.negative_bits == b.negative_bits && a.scale == b.scale &&
         a.positive_bits == b.positive_bits;
}

// What protobuf makes of `bytes`, as a view; false when it refuses them.
bool ProtobufView(const std::string& bytes, v1::PushRequest* message,
                  PushView* view) {
  if (!message->ParseFromString(bytes)) return false;
  *view = ViewOf(*message);
  return true;
}

// Both parsers on `bytes` cut into pieces: both refuse, or both give the
// same fields.
void ExpectSameAsProtobuf(const std::string& bytes, const WireBytes& pieces,
                          const std::string& what) {
  v1::PushRequest message;
  PushView expected;
  const bool protobuf_ok = ProtobufView(bytes, &message, &expected);
  PushView parsed;
  const absl::Status status =
      ParsePushRequest(pieces, std::numeric_limits<uint64_t>::max(), &parsed);
  ASSERT_EQ(status.ok(), protobuf_ok) << what << ": " << status;
  if (!protobuf_ok) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << what << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("byte ")) << what;
    return;
  }
  EXPECT_TRUE(parsed == expected) << what;
  EXPECT_EQ(parsed.wire.ToString(), bytes) << what;
}

TEST(PushWireTest, EveryEncodingInAnyPiecesParsesAsProtobufDoes) {
  std::mt19937_64 rng(7);
  const std::string bytes = PushOf(EveryEncoding(5003, 1)).SerializeAsString();
  ExpectSameAsProtobuf(bytes, WireBytes(bytes), "one piece");
  ExpectSameAsProtobuf(bytes, SplitEvery(bytes, 1), "one byte a piece");
  ExpectSameAsProtobuf(bytes, SplitEvery(bytes, 16384), "16 KiB pieces");
  for (int round = 0; round < 50; ++round) {
    ExpectSameAsProtobuf(bytes, SplitAnywhere(bytes, 1 + round, rng),
                         absl::StrCat("random cuts, round ", round));
  }
}

TEST(PushWireTest, ChunksDecodeFromPiecesAsFromTheMessage) {
  std::mt19937_64 rng(8);
  // Odd sizes put values across piece boundaries at every offset.
  for (uint64_t numel : {1u, 7u, 1023u, 1025u, 40001u}) {
    const std::vector<CompressedChunk> chunks = EveryEncoding(numel, numel);
    const v1::PushRequest push = PushOf(chunks);
    const std::string bytes = push.SerializeAsString();
    for (size_t piece : {size_t{1}, size_t{3}, size_t{4093}, size_t{16384}}) {
      PushView view;
      ASSERT_TRUE(ParsePushRequest(SplitEvery(bytes, piece), 100, &view).ok());
      ASSERT_EQ(view.chunks.size(), chunks.size());
      for (size_t i = 0; i < chunks.size(); ++i) {
        DecodeOptions options;
        options.expected_numel = numel;
        CompressedChunk from_view;
        CompressedChunk from_message;
        ASSERT_TRUE(
            DecodeChunk(view.chunks[i].gradient, options, &from_view).ok());
        ASSERT_TRUE(
            DecodeChunk(push.chunks(i).gradient(), options, &from_message)
                .ok());
        EXPECT_TRUE(SameChunk(from_view, from_message))
            << "numel " << numel << ", pieces of " << piece << ", chunk " << i;
        // The largest magnitude too, found as the values are checked.
        EXPECT_EQ(from_view.max_magnitude, from_message.max_magnitude)
            << "numel " << numel << ", pieces of " << piece << ", chunk " << i;
        // A sparse chunk of (nearly) every element travels dense.
        CompressedChunk sent = chunks[i];
        DensifyIfSmaller(&sent);
        EXPECT_TRUE(SameChunk(from_view, sent))
            << "numel " << numel << ", pieces of " << piece << ", chunk " << i;
      }
    }
  }
}

TEST(PushWireTest, NonFiniteValueInAnyPieceIsNamedAtItsPosition) {
  for (ValuePrecision precision :
       {ValuePrecision::kFp32, ValuePrecision::kFp16, ValuePrecision::kBf16}) {
    for (size_t bad : {size_t{0}, size_t{1023}, size_t{1024}, size_t{4999}}) {
      CompressedChunk chunk;
      chunk.numel = 5000;
      chunk.precision = precision;
      chunk.values.assign(5000, 1.0f);
      chunk.values[bad] = std::numeric_limits<float>::quiet_NaN();
      v1::ChunkData data;
      ASSERT_TRUE(EncodeChunk(chunk, &data).ok());
      // Pieces of 3 bytes: most values straddle two pieces.
      const std::string& values = data.dense().values();
      ChunkDataView view = ViewOf(data);
      view.dense.values = SplitEvery(values, 3);
      DecodeOptions options;
      options.expected_numel = 5000;
      CompressedChunk out;
      out.values = {42.0f};
      const absl::Status status = DecodeChunk(view, options, &out);
      EXPECT_TRUE(absl::IsInvalidArgument(status));
      EXPECT_THAT(status.message(),
                  HasSubstr(absl::StrCat("position ", bad, " is nan")))
          << status;
      EXPECT_EQ(out.values, std::vector<float>{42.0f}) << "touched on error";
      options.non_finite = NonFinitePolicy::kZero;
      ASSERT_TRUE(DecodeChunk(view, options, &out).ok());
      EXPECT_EQ(out.values[bad], 0.0f);
      EXPECT_EQ(out.values[bad == 0 ? 1 : bad - 1], 1.0f);
    }
  }
}

// Hand-written wire bytes for the cases protobuf's rules decide.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Tag(uint32_t field, uint32_t type) {
  return Varint(field << 3 | type);
}
std::string Len(uint32_t field, const std::string& body) {
  return Tag(field, 2) + Varint(body.size()) + body;
}

TEST(PushWireTest, ProtobufRulesForRepeatsUnknownFieldsAndOneofs) {
  const std::string dense_fp32 =
      Tag(1, 0) + Varint(1) + Len(2, std::string(8, '\x01'));
  const std::string sign = Len(2, std::string(1, '\x03'));
  const struct {
    std::string name;
    std::string bytes;
  } cases[] = {
      {"a scalar twice: the last wins",
       Tag(1, 0) + Varint(5) + Tag(1, 0) + Varint(2)},
      {"a uint32 from a 10-byte varint is truncated",
       Tag(1, 0) + Varint(~uint64_t{0})},
      {"a message field twice is merged",
       Len(3, Tag(1, 0) + Varint(9) + Len(2, Tag(1, 0) + Varint(2))) +
           Len(3, "")},
      {"a gradient twice in one entry is merged",
       Len(3, Len(2, Tag(1, 0) + Varint(2)) + Len(2, Len(2, dense_fp32)))},
      {"another oneof member replaces the first",
       Len(3,
           Len(2, Tag(1, 0) + Varint(2) + Len(2, dense_fp32) + Len(6, sign)))},
      {"the same oneof member twice is merged",
       Len(3, Len(2, Len(6, Tag(1, 5) + std::string("\0\0\x80\x3f", 4)) +
                         Len(6, sign)))},
      {"unknown fields of every wire type are skipped",
       Tag(9, 0) + Varint(1) + Tag(10, 1) + std::string(8, 'x') + Tag(11, 5) +
           std::string(4, 'y') + Len(12, "zz") + Tag(13, 3) + Tag(14, 0) +
           Varint(3) + Tag(15, 3) + Tag(15, 4) + Tag(13, 4) + Tag(2, 0) +
           Varint(7)},
      {"a known field with another wire type is an unknown field",
       Tag(1, 5) + std::string(4, 'w') + Len(2, "abc") + Tag(2, 0) + Varint(8)},
      {"an unknown field inside a payload",
       Len(3, Len(2, Len(2, Tag(7, 0) + Varint(1) + dense_fp32)))},
      {"an empty message", ""},
      {"a group that never ends", Tag(13, 3) + Tag(14, 0) + Varint(3)},
      {"a group that ends with another number", Tag(13, 3) + Tag(12, 4)},
      {"an end-group tag alone", Tag(13, 4)},
      {"wire type 6", Tag(3, 6) + "x"},
      {"field number 0", Tag(0, 0) + Varint(1)},
      {"a length past the end", Tag(3, 2) + Varint(10) + "abc"},
      {"a length past its message",
       Len(3, Tag(2, 2) + Varint(5) + "ab") + "cde"},
      {"a fixed32 cut short", Tag(9, 5) + "ab"},
      {"a varint cut short", Tag(1, 0) + "\x80"},
      {"an 11-byte varint", Tag(2, 0) + std::string(10, '\xff') + "\x01"},
  };
  std::mt19937_64 rng(9);
  for (const auto& c : cases) {
    ExpectSameAsProtobuf(c.bytes, WireBytes(c.bytes), c.name);
    ExpectSameAsProtobuf(c.bytes, SplitAnywhere(c.bytes, 5, rng),
                         c.name + ", in pieces");
  }
}

TEST(PushWireTest, GroupsNestedPastProtobufsLimitAreRefusedAsProtobufDoes) {
  for (int depth : {50, 99, 100, 101, 150}) {
    std::string bytes;
    for (int i = 0; i < depth; ++i) bytes += Tag(20, 3);
    for (int i = 0; i < depth; ++i) bytes += Tag(20, 4);
    ExpectSameAsProtobuf(bytes, WireBytes(bytes),
                         absl::StrCat(depth, " nested groups"));
  }
}

TEST(PushWireTest, MutatedPushesAreRefusedOrReadAsProtobufDoes) {
  std::mt19937_64 rng(10);
  const std::string valid = PushOf(EveryEncoding(300, 2)).SerializeAsString();
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.resize(at);
          break;
        case 2:
          bytes.insert(at, 1, static_cast<char>(rng()));
          break;
        default:
          bytes.erase(at, 1 + rng() % 8);
          break;
      }
      if (bytes.empty()) bytes = valid;
    }
    v1::PushRequest message;
    accepted += message.ParseFromString(bytes);
    ExpectSameAsProtobuf(bytes, SplitAnywhere(bytes, 4, rng),
                         absl::StrCat("mutation round ", round));
  }
  // Both outcomes are exercised.
  EXPECT_GT(accepted, 100);
  EXPECT_LT(accepted, 2900);
}

TEST(PushWireTest, MoreChunkEntriesThanAllowedIsResourceExhausted) {
  v1::PushRequest push;
  for (int i = 0; i < 5; ++i) push.add_chunks()->set_key(i);
  const std::string bytes = push.SerializeAsString();
  PushView view;
  EXPECT_TRUE(ParsePushRequest(WireBytes(bytes), 5, &view).ok());
  EXPECT_EQ(view.chunks.size(), 5u);
  const absl::Status status = ParsePushRequest(WireBytes(bytes), 4, &view);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("more than 4 chunk entries"));
}

TEST(PushWireTest, AnErrorNamesTheByteWhereItIs) {
  const std::string bytes = Tag(1, 0) + Varint(3) + Tag(3, 2) + Varint(200);
  PushView view;
  const absl::Status status = ParsePushRequest(WireBytes(bytes), 10, &view);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(),
              HasSubstr("byte 3: a length of 200 with only 0 bytes after it"));
}

TEST(WireBytesTest, FlattenCopyOutAndEquality) {
  WireBytes bytes;
  EXPECT_TRUE(bytes.empty());
  EXPECT_TRUE(bytes.pieces().empty());
  std::string scratch;
  EXPECT_EQ(bytes.Flatten(&scratch), "");
  bytes.Append("abc");
  bytes.Append("");
  EXPECT_EQ(bytes.pieces().size(), 1u);
  EXPECT_EQ(bytes.Flatten(&scratch).data(), bytes.pieces()[0].data())
      << "one piece is not copied";
  bytes.Append("defg");
  bytes.Append("h");
  EXPECT_EQ(bytes.size(), 8u);
  EXPECT_EQ(bytes.pieces().size(), 3u);
  EXPECT_EQ(bytes.Flatten(&scratch), "abcdefgh");
  char out[4] = {};
  bytes.CopyOut(2, 4, out);
  EXPECT_EQ(std::string(out, 4), "cdef");
  EXPECT_TRUE(bytes == WireBytes("abcdefgh"));
  EXPECT_FALSE(bytes == WireBytes("abcdefgX"));
  bytes.Clear();
  EXPECT_TRUE(bytes.empty());
  EXPECT_TRUE(bytes == WireBytes());
}

}  // namespace
}  // namespace gradwire
