// A string as a JSON string value: quotes; `"`, `\` and the control
// characters escaped (\b \f \n \r \t, else \u00xx in lower case); every
// other byte as it is (UTF-8 stays UTF-8). This is byte for byte what
// nlohmann's dump() and Python's json.dumps(ensure_ascii=False) write, so
// both the API server's hand-written events and the template engine's
// tojson use it. The caller checks that `s` is UTF-8 where it matters.
#pragma once

#include <string>
#include <string_view>

namespace sightline {

inline void AppendJsonString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += "\\u00";
          *out += kHex[static_cast<unsigned char>(c) >> 4];
          *out += kHex[static_cast<unsigned char>(c) & 15];
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

}  // namespace sightline
