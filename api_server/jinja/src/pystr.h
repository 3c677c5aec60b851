// Python's text forms of values, as a template prints them: str() for
// `{{ x }}`, repr() inside containers, float repr (shortest round-trip,
// exponent outside [1e-4, 1e16)), and json.dumps as transformers' `tojson`
// calls it (ensure_ascii=False). Plus UTF-8 code point helpers: Python
// indexes, slices and measures strings by code point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/jinja/value.h"
#include "sightline/utf8.h"

namespace sightline::jinja {

std::string FloatRepr(double d);
std::string Str(const Value& v);   // Python str(); Undefined is ""
std::string Repr(const Value& v);  // Python repr()

struct JsonOptions {
  int indent = -1;                            // < 0: None (one line)
  std::string item_separator, key_separator;  // empty: json.dumps' defaults
  bool sort_keys = false;
};
std::string ToJson(const Value& v, const JsonOptions& o);

// Template text as code points. Ill-formed bytes (only a template read raw
// from a file can hold them; JSON input is valid) become one U+FFFD each, as
// utf8proc_iterate read them when the interpreter was written; encoding and
// counting are sightline/utf8.h's.
inline std::vector<char32_t> DecodeUtf8(std::string_view s) {
  return DecodeUtf8PerByte(s);
}

// Unicode case mapping per code point (utf8proc), as str.upper()/lower()
// do for all but the few one-to-many mappings (e.g. 'ß'.upper() is 'SS').
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
bool IsSpace(char32_t c);  // str.isspace() / str.split() whitespace

}  // namespace sightline::jinja
