// Byte counts for people: the progress lines of gradwire-worker, its final
// line and the report of `gradwire local` all print sizes through here, so
// that they agree on units and rounding.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_COMMON_FORMAT_HUMAN_BYTES_H_
#define GRADWIRE_COMMON_FORMAT_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

namespace gradwire {

// "0 B", "999 B", "456.0 kB", "1.2 GB", ... (decimal units up to TB, one
// decimal above bytes).
std::string HumanBytes(uint64_t bytes);

// How many times fewer bytes `sent` is than `dense`: dense / sent, or 0
// when nothing was sent.
double CompressionRatio(uint64_t dense, uint64_t sent);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_FORMAT_HUMAN_BYTES_H_
