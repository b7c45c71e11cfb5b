// Compressors by name.
#ifndef GRADWIRE_COMMON_COMPRESS_REGISTRY_H_
#define GRADWIRE_COMMON_COMPRESS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compress/compressor.h"

namespace gradwire {

// Builds the compressor `options.name` after validating every option it
// uses. Returns INVALID_ARGUMENT naming the bad option (ratio outside (0, 1],
// levels outside [1, 65535], negative or non-finite threshold, ...) or
// NOT_FOUND listing the known names.
absl::StatusOr<std::unique_ptr<Compressor>> MakeCompressor(
    const CompressorOptions& options);

// Whether the compressor `name` keeps a fraction `ratio` of the elements
// (topk, randomk, dgc).
bool IsSparsifier(const std::string& name);

// Every registered name, sorted.
std::vector<std::string> CompressorNames();

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_REGISTRY_H_
