// The fingerprint of a chunk's fp32 values: how a worker and a shard tell,
// without sending the values, whether they hold the same initial weights
// (gradwire.v1.ChunkDeclaration.fingerprint, InitResponse.fingerprints).
//
// Thread safety: a pure function.
#ifndef GRADWIRE_COMMON_CODEC_CHUNK_FINGERPRINT_H_
#define GRADWIRE_COMMON_CODEC_CHUNK_FINGERPRINT_H_

#include <cstdint>

#include "absl/types/span.h"

namespace gradwire {

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over the
// values' IEEE-754 binary32 bytes in little-endian order, element by
// element: the same values give the same fingerprint on every host, and
// -0.0 differs from 0.0 (their bytes differ, as a dense pull's would). An
// empty span gives the offset basis. About 1 ns per byte.
uint64_t ChunkFingerprint(absl::Span<const float> values);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_CHUNK_FINGERPRINT_H_
