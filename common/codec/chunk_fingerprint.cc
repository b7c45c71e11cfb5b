#include "common/codec/chunk_fingerprint.h"

#include <cstring>

namespace gradwire {

uint64_t ChunkFingerprint(absl::Span<const float> values) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const float value : values) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    // Little-endian byte order whatever the host's.
    for (int byte = 0; byte < 4; ++byte) {
      hash = (hash ^ ((bits >> (8 * byte)) & 0xffu)) * kPrime;
    }
  }
  return hash;
}

}  // namespace gradwire
