// The identity of an API-server process (the hello of its connections,
// sightline/ipc/frame_stream.h): "c<index>.<incarnation>"
// (decimal index, lower-case hex incarnation). The incarnation is random per
// process, so a restarted API server has a new identity: the engine can never
// route a predecessor's outputs to it, and sees the restart as a new
// incarnation of the same index. Both ends format and parse it here.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sightline::ipc {

struct ClientId {
  std::uint32_t index = 0;
  std::uint64_t incarnation = 0;
  bool operator==(const ClientId&) const = default;
};

inline std::string FormatClientIdentity(ClientId id) {
  char hex[17];
  const auto r = std::to_chars(hex, hex + sizeof hex, id.incarnation, 16);
  return "c" + std::to_string(id.index) + "." + std::string(hex, r.ptr);
}

// nullopt unless `s` is exactly what FormatClientIdentity writes (an identity
// is chosen by the peer, so it is input like any other).
inline std::optional<ClientId> ParseClientIdentity(std::string_view s) {
  if (s.size() < 4 || s.size() > 1 + 10 + 1 + 16 || s[0] != 'c') return std::nullopt;
  const char* end = s.data() + s.size();
  ClientId id;
  auto r = std::from_chars(s.data() + 1, end, id.index, 10);
  if (r.ec != std::errc() || r.ptr == s.data() + 1 || r.ptr == end || *r.ptr != '.')
    return std::nullopt;
  const char* hex = r.ptr + 1;
  r = std::from_chars(hex, end, id.incarnation, 16);
  if (r.ec != std::errc() || r.ptr != end || hex == end) return std::nullopt;
  if (FormatClientIdentity(id) != s) return std::nullopt;  // no "+", "0x", upper case, zeros
  return id;
}

}  // namespace sightline::ipc
