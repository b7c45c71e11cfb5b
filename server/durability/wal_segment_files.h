// Where the write-ahead log's segments lie in a directory: shared by the
// segment reader (wal_segment.cc) and the writer (write_ahead_log.cc), and
// private to this library. The format itself is described in
// write_ahead_log.h.
#ifndef GRADWIRE_SERVER_DURABILITY_WAL_SEGMENT_FILES_H_
#define GRADWIRE_SERVER_DURABILITY_WAL_SEGMENT_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradwire {

// Generations of the segments in `dir` (files with a canonical segment
// name, WalSegmentFileName), ascending; empty when `dir` is missing.
// Errors: the directory cannot be listed.
absl::StatusOr<std::vector<uint64_t>> ListWalGenerations(
    const std::string& dir);

// `dir`/WalSegmentFileName(`generation`). Pure.
std::string WalSegmentPath(const std::string& dir, uint64_t generation);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_WAL_SEGMENT_FILES_H_
