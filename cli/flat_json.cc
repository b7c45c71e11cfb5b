#include "cli/flat_json.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradwire::cli {
namespace {

// A cursor over the text; every method reports errors with the offset.
class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {}

  absl::StatusOr<FlatJson> Object() {
    FlatJson object;
    if (!Consume('{')) return Error("expected '{'");
    if (Consume('}')) return Finish(std::move(object));
    do {
      absl::StatusOr<std::string> key = String();
      if (!key.ok()) return key.status();
      if (!Consume(':')) return Error("expected ':'");
      absl::StatusOr<JsonValue> value = Value();
      if (!value.ok()) return value.status();
      object.emplace_back(std::move(*key), std::move(*value));
    } while (Consume(','));
    if (!Consume('}')) return Error("expected ',' or '}'");
    return Finish(std::move(object));
  }

 private:
  absl::StatusOr<FlatJson> Finish(FlatJson object) {
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing text");
    return object;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON: ", what, " at offset ", pos_));
  }

  absl::StatusOr<JsonValue> Value() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a value");
    const char c = text_[pos_];
    if (c == '"') {
      absl::StatusOr<std::string> s = String();
      if (!s.ok()) return s.status();
      return JsonValue::String(std::move(*s));
    }
    if (c == '{' || c == '[') return Error("nested values are not supported");
    for (absl::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        JsonValue v;
        v.kind =
            word == "null" ? JsonValue::Kind::kNull : JsonValue::Kind::kBool;
        v.text = std::string(word);
        return v;
      }
    }
    return Number();
  }

  absl::StatusOr<JsonValue> Number() {
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (absl::ascii_isdigit(text_[pos_]) ||
            absl::string_view("+-.eE").find(text_[pos_]) !=
                absl::string_view::npos)) {
      ++pos_;
    }
    JsonValue v;
    v.kind = JsonValue::Kind::kNumber;
    v.text = std::string(text_.substr(start, pos_ - start));
    if (v.text.empty() || !absl::SimpleAtod(v.text, &v.number) ||
        !std::isfinite(v.number)) {
      pos_ = start;
      return Error("malformed value");
    }
    return v;
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Error("expected a string");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      const char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in a string");
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (absl::Status s = Escape(&out); !s.ok()) return s;
    }
    if (!Consume('"')) return Error("unterminated string");
    return out;
  }

  absl::Status Escape(std::string* out) {
    if (pos_ >= text_.size()) return Error("unterminated escape");
    const char c = text_[pos_++];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out->push_back(c);
        return absl::OkStatus();
      case 'b':
        out->push_back('\b');
        return absl::OkStatus();
      case 'f':
        out->push_back('\f');
        return absl::OkStatus();
      case 'n':
        out->push_back('\n');
        return absl::OkStatus();
      case 'r':
        out->push_back('\r');
        return absl::OkStatus();
      case 't':
        out->push_back('\t');
        return absl::OkStatus();
      case 'u':
        return Unicode(out);
      default:
        return Error("bad escape");
    }
  }

  // \uXXXX as UTF-8 (surrogate pairs are not combined; the summaries are
  // ASCII).
  absl::Status Unicode(std::string* out) {
    uint32_t code = 0;
    if (pos_ + 4 > text_.size() ||
        !absl::SimpleHexAtoi(text_.substr(pos_, 4), &code)) {
      return Error("bad \\u escape");
    }
    pos_ += 4;
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
    return absl::OkStatus();
  }

  const absl::string_view text_;
  size_t pos_ = 0;
};

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

JsonValue JsonValue::Integer(uint64_t value) {
  JsonValue v;
  v.kind = Kind::kNumber;
  v.text = absl::StrCat(value);
  v.number = static_cast<double>(value);
  return v;
}

JsonValue JsonValue::Real(double value) {
  JsonValue v;
  v.kind = Kind::kNumber;
  v.number = std::isfinite(value) ? value : 0;
  v.text = absl::StrFormat("%.6g", v.number);
  return v;
}

JsonValue JsonValue::String(std::string value) {
  JsonValue v;
  v.kind = Kind::kString;
  v.text = std::move(value);
  return v;
}

absl::StatusOr<FlatJson> ParseFlatJson(absl::string_view text) {
  return Reader(text).Object();
}

const JsonValue* FindMember(const FlatJson& object, absl::string_view key) {
  for (const auto& [name, value] : object) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string FlatJsonToString(const FlatJson& object) {
  std::string out = "{";
  for (const auto& [name, value] : object) {
    if (out.size() > 1) out += ", ";
    absl::StrAppend(&out, Quote(name), ": ",
                    value.kind == JsonValue::Kind::kString ? Quote(value.text)
                                                           : value.text);
  }
  out += "}\n";
  return out;
}

}  // namespace gradwire::cli
