// What the every-code-point tests of hf_normalizers_test.cc and
// hf_pre_tokenizers_test.cc share: the inputs components.mjs --exhaustive
// builds, its digest function, and the digests it wrote.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hf/unicode.h"

namespace sightline::hf {

// The generator's FNV-1a (32 bits), written out: it is five lines and must
// equal the JavaScript one bit for bit.
inline std::uint32_t Fnv1a(std::string_view s) {
  std::uint32_t h = 0x811c9dc5u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x01000193u;
  return h;
}

// Every code point U+0001..U+10FFFF but the surrogates, `wrap`ped, in chunks
// of `chunk_size` joined by "\n": as components.mjs --exhaustive builds them.
inline std::vector<std::string> AllCodepointChunks(std::size_t chunk_size, std::string_view before,
                                                   std::string_view after) {
  std::vector<std::string> chunks;
  std::string cur;
  std::size_t n = 0;
  for (char32_t c = 1; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    if (n > 0) cur += '\n';
    cur += before;
    AppendUtf8(c, &cur);
    cur += after;
    if (++n == chunk_size) {
      chunks.push_back(std::move(cur));
      cur.clear();
      n = 0;
    }
  }
  if (n > 0) chunks.push_back(std::move(cur));
  return chunks;
}

inline const nlohmann::json& Digests() {
  static const nlohmann::json data = [] {
    std::ifstream in(std::string(SIGHTLINE_SOURCE_TESTDATA) + "/hf_unicode_digests.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }();
  return data;
}

}  // namespace sightline::hf
