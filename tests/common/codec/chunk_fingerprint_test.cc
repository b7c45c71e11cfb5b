// ChunkFingerprint: FNV-1a 64 over the values' little-endian fp32 bytes.
#include "common/codec/chunk_fingerprint.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

// The reference: FNV-1a 64 over the bytes given one by one.
uint64_t Fnv1a64(const std::vector<uint8_t>& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const uint8_t byte : bytes) hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

TEST(ChunkFingerprintTest, EmptyIsTheOffsetBasis) {
  EXPECT_EQ(ChunkFingerprint({}), 0xcbf29ce484222325ull);
}

TEST(ChunkFingerprintTest, HashesTheLittleEndianBytesOfEachValue) {
  // 1.0f is 0x3f800000, -2.5f is 0xc0200000.
  const std::vector<float> values = {1.0f, -2.5f};
  EXPECT_EQ(ChunkFingerprint(values),
            Fnv1a64({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0}));
}

TEST(ChunkFingerprintTest, IsStableOnTheWire) {
  // Workers and shards of different builds compare fingerprints, so the
  // value is pinned: FNV-1a 64 of "abcd" (bytes 61 62 63 64), which is the
  // float 0x64636261.
  const uint32_t bits = 0x64636261u;
  float value;
  static_assert(sizeof(value) == sizeof(bits));
  std::memcpy(&value, &bits, sizeof(bits));
  EXPECT_EQ(ChunkFingerprint({value}), 0xfc179f83ee0724ddull);
  EXPECT_EQ(Fnv1a64({0x61, 0x62, 0x63, 0x64}), 0xfc179f83ee0724ddull);
}

TEST(ChunkFingerprintTest, TellsValuesApart) {
  const std::vector<float> a = {0.5f, 0.25f, 0.125f};
  std::vector<float> b = a;
  EXPECT_EQ(ChunkFingerprint(a), ChunkFingerprint(b));
  b[2] = 0.1250001f;
  EXPECT_NE(ChunkFingerprint(a), ChunkFingerprint(b));
  // Signed zeros are different bytes, as a dense pull would carry them.
  EXPECT_NE(ChunkFingerprint(std::vector<float>{0.0f}),
            ChunkFingerprint(std::vector<float>{-0.0f}));
  // Order counts.
  EXPECT_NE(ChunkFingerprint(std::vector<float>{1.0f, 2.0f}),
            ChunkFingerprint(std::vector<float>{2.0f, 1.0f}));
}

}  // namespace
}  // namespace gradwire
