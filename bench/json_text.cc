#include "bench/json_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradwire::bench {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace gradwire::bench
