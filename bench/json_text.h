#ifndef GRADWIRE_BENCH_JSON_TEXT_H_
#define GRADWIRE_BENCH_JSON_TEXT_H_

#include <string>

namespace gradwire::bench {

// `s` as a JSON string literal: quotes, with `"` and `\` escaped and control
// characters written as \u00XX. The benchmark reports are written by hand
// (no JSON library is packaged), so every free-text field goes through this.
std::string JsonString(const std::string& s);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_JSON_TEXT_H_
