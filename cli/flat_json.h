// A flat JSON object (string keys; number, string, bool or null values), as
// gradwire-worker writes with --summary-json: read, edited and written back
// in key order. Nested objects and arrays are not supported, on purpose: the
// summaries are flat, and a small reader is easy to trust.
#ifndef GRADWIRE_CLI_FLAT_JSON_H_
#define GRADWIRE_CLI_FLAT_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire::cli {

struct JsonValue {
  enum class Kind { kNumber, kString, kBool, kNull };
  Kind kind = Kind::kNull;
  // kNumber, kBool, kNull: the JSON text ("12", "1.5e3", "true", "null");
  // kString: the decoded string.
  std::string text;
  // kNumber: the value.
  double number = 0;

  static JsonValue Integer(uint64_t value);
  static JsonValue Real(double value);
  static JsonValue String(std::string value);
};

// Members in the order they appear; a repeated key keeps both entries.
using FlatJson = std::vector<std::pair<std::string, JsonValue>>;

// Parses one object, with optional surrounding whitespace. INVALID_ARGUMENT
// with the byte offset for anything else (nesting, trailing text, a bad
// escape, a malformed number). \u escapes outside ASCII become UTF-8.
absl::StatusOr<FlatJson> ParseFlatJson(absl::string_view text);

// The first member named `key`, or nullptr.
const JsonValue* FindMember(const FlatJson& object, absl::string_view key);

// One line: {"key": value, ...} followed by a newline.
std::string FlatJsonToString(const FlatJson& object);

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_FLAT_JSON_H_
