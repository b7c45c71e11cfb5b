// Seeds of the GetInfo and Pull fuzz targets (getinfo_fuzz.cc,
// pull_fuzz.cc), in the layouts their headers describe; make_seeds.cc
// writes them to corpus/getinfo and corpus/pull.
//
// Thread safety: the functions hold no state.
#ifndef GRADWIRE_TESTS_FUZZ_REQUEST_SEEDS_H_
#define GRADWIRE_TESTS_FUZZ_REQUEST_SEEDS_H_

#include <string>
#include <utility>
#include <vector>

namespace gradwire::fuzz {

// (file name, input) pairs: empty requests of an uninitialised, an
// initialised and a trained shard, a few and too many unknown fields, an
// unknown group, bytes that are not a message, and requests cut into
// small slices.
std::vector<std::pair<std::string, std::string>> GetInfoSeeds();

// (file name, input) pairs: valid dense and delta pulls in every mode, an
// unknown chunk key, a chunk named twice, more chunk entries than the
// shard accepts, many unknown fields (at the top and inside a chunk), a
// huge min_step, answers at and over max_message_bytes, and requests cut
// into small slices.
std::vector<std::pair<std::string, std::string>> PullSeeds();

}  // namespace gradwire::fuzz

#endif  // GRADWIRE_TESTS_FUZZ_REQUEST_SEEDS_H_
