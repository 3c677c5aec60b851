#include "sightline/tracing/trace_context.h"

#include <algorithm>
#include <random>

#include "ows.h"

namespace sightline::tracing {

namespace {

int HexDigit(char c) {  // lower-case only, as §3.2.2 requires
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <std::size_t N>
bool ParseHex(std::string_view s, std::array<std::uint8_t, N>* out) {
  if (s.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = HexDigit(s[2 * i]), lo = HexDigit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <std::size_t N>
bool AllZero(const std::array<std::uint8_t, N>& a) {
  return std::all_of(a.begin(), a.end(), [](std::uint8_t b) { return b == 0; });
}

bool KeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' ||
         c == '/';
}

// key = simple-key / multi-tenant-key (§3.3.1.3.1): lcalpha 0*255(keychar),
// or tenant@system with a tenant of 1-241 and a system of 1-14 characters.
bool ValidKey(std::string_view key) {
  const std::size_t at = key.find('@');
  if (at == std::string_view::npos) {
    if (key.empty() || key.size() > 256 || !(key[0] >= 'a' && key[0] <= 'z')) return false;
    return std::all_of(key.begin(), key.end(), KeyChar);
  }
  const std::string_view tenant = key.substr(0, at), system = key.substr(at + 1);
  if (tenant.empty() || tenant.size() > 241 || system.empty() || system.size() > 14) return false;
  if (!((tenant[0] >= 'a' && tenant[0] <= 'z') || (tenant[0] >= '0' && tenant[0] <= '9')))
    return false;
  if (!(system[0] >= 'a' && system[0] <= 'z')) return false;
  return std::all_of(tenant.begin(), tenant.end(), KeyChar) &&
         std::all_of(system.begin(), system.end(), KeyChar);
}

// value = 0*255(chr) nblk-chr; chr is 0x20-0x7E except ',' and '=' (§3.3.1.3.2).
bool ValidValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; });
}

std::mt19937_64& Generator() {
  thread_local std::mt19937_64 g([] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }());
  return g;
}

template <std::size_t N>
std::array<std::uint8_t, N> RandomNonZero() {
  std::array<std::uint8_t, N> id{};
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      const std::uint64_t r = Generator()();
      for (std::size_t k = 0; k < 8 && i + k < N; ++k)
        id[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
    }
  } while (AllZero(id));
  return id;
}

}  // namespace

bool ValidTracestate(std::string_view s) {
  if (s.size() > 512) return false;
  int members = 0;
  while (true) {
    const std::size_t comma = s.find(',');
    const std::string_view member = TrimOws(s.substr(0, comma));
    // Empty members are allowed and skipped (§3.3.1.1).
    if (!member.empty()) {
      const std::size_t eq = member.find('=');
      if (eq == std::string_view::npos || !ValidKey(member.substr(0, eq)) ||
          !ValidValue(member.substr(eq + 1)) || ++members > 32)
        return false;
    }
    if (comma == std::string_view::npos) return true;
    s.remove_prefix(comma + 1);
  }
}

std::optional<TraceContext> ParseTraceparent(std::string_view h, std::string_view tracestate) {
  h = TrimOws(h);
  // version "-" trace-id "-" parent-id "-" trace-flags: 2+1+32+1+16+1+2.
  constexpr std::size_t kLength = 55;
  if (h.size() < kLength) return std::nullopt;
  std::array<std::uint8_t, 1> version{}, flags{};
  if (!ParseHex(h.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  // Version 00 has exactly these fields; a later one may add "-..." (§3.2.4).
  if (version[0] == 0 ? h.size() != kLength : h.size() > kLength && h[kLength] != '-')
    return std::nullopt;
  if (h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  TraceContext c;
  if (!ParseHex(h.substr(3, 32), &c.trace_id) || !ParseHex(h.substr(36, 16), &c.span_id) ||
      !ParseHex(h.substr(53, 2), &flags) || AllZero(c.trace_id) || AllZero(c.span_id))
    return std::nullopt;
  c.flags = flags[0];
  if (ValidTracestate(tracestate)) c.trace_state = std::string(TrimOws(tracestate));
  return c;
}

std::string ToHex(const std::uint8_t* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * size, '0');
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::string FormatTraceparent(const TraceContext& c) {
  return "00-" + ToHex(c.trace_id.data(), c.trace_id.size()) + "-" +
         ToHex(c.span_id.data(), c.span_id.size()) + "-" + ToHex(&c.flags, 1);
}

TraceId NewTraceId() {
  return RandomNonZero<16>();
}

SpanId NewSpanId() {
  return RandomNonZero<8>();
}

}  // namespace sightline::tracing
