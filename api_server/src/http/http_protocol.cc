#include "http/http_protocol.h"

#include <charconv>
#include <optional>

namespace sightline::api::http_internal {

namespace {
char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool IsOws(char c) {
  return c == ' ' || c == '\t';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}
}  // namespace

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (Lower(a[i]) != Lower(b[i])) return false;
  return true;
}

void SplitTarget(std::string_view target, std::string* path, std::string* query) {
  std::string_view rest = target;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (rest.size() >= scheme.size() && IEquals(rest.substr(0, scheme.size()), scheme)) {
      rest.remove_prefix(scheme.size());
      // The authority ends at the path or the query.
      const std::size_t end = rest.find_first_of("/?");
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
      path->assign("/");
      break;
    }
  }
  const std::size_t q = rest.find('?');
  const std::string_view p = rest.substr(0, q);
  if (!p.empty() || rest.data() == target.data()) path->assign(p);
  if (q == std::string_view::npos)
    query->clear();
  else
    query->assign(rest.substr(q + 1));
}

TransferCoding ClassifyTransferEncoding(const std::vector<std::string_view>& values) {
  int codings = 0;
  bool chunked_only = true;
  for (std::string_view value : values) {
    // A comma-separated list; empty elements are allowed (RFC 9110 §5.6.1).
    while (true) {
      const std::size_t comma = value.find(',');
      const std::string_view coding = Trim(value.substr(0, comma));
      if (!coding.empty()) {
        ++codings;
        if (!IEquals(coding, "chunked")) chunked_only = false;
      }
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  if (codings == 0) return values.empty() ? TransferCoding::kNone : TransferCoding::kUnsupported;
  return codings == 1 && chunked_only ? TransferCoding::kChunked : TransferCoding::kUnsupported;
}

bool AcceptsGzip(std::string_view accept_encoding) {
  std::optional<bool> gzip, any;  // what "gzip" and "*" say, when listed
  for (std::string_view rest = accept_encoding; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t semi = item.find(';');
    const std::string_view coding = Trim(item.substr(0, semi));
    // The weight: "q=" among the parameters, 0 to 1 with up to three
    // decimals; one that does not parse leaves the coding acceptable.
    bool acceptable = true;
    for (std::string_view params = semi == std::string_view::npos ? "" : item.substr(semi + 1);
         !params.empty();) {
      const std::size_t next = params.find(';');
      const std::string_view param = Trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
      if (param.size() < 2 || Lower(param[0]) != 'q' || param[1] != '=') continue;
      const std::string_view value = Trim(param.substr(2));
      double q = 1;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), q);
      if (ec == std::errc() && end == value.data() + value.size()) acceptable = q > 0;
    }
    if (IEquals(coding, "gzip") || IEquals(coding, "x-gzip"))
      gzip = gzip.value_or(false) || acceptable;
    else if (coding == "*")
      any = any.value_or(false) || acceptable;
  }
  return gzip ? *gzip : any.value_or(false);
}

bool BearerMatches(std::string_view authorization, std::string_view key) {
  std::string_view v = Trim(authorization);
  const std::size_t space = v.find(' ');
  if (space == std::string_view::npos || !IEquals(v.substr(0, space), "bearer")) return false;
  const std::string_view token = Trim(v.substr(space));
  if (token.size() != key.size()) return false;
  unsigned char diff = 0;  // constant time: the key is a secret
  for (std::size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(token[i] ^ key[i]);
  return diff == 0;
}

namespace {
// A chunk's size line (hex, CRLF) into `line`; its length.
std::size_t SizeLine(std::size_t size, char (&line)[kChunkFraming]) {
  char* end = std::to_chars(line, line + 16, size, 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  return static_cast<std::size_t>(end - line);
}
}  // namespace

std::string ChunkWire(std::string_view data) {
  char line[kChunkFraming];
  const std::size_t size_line = SizeLine(data.size(), line);
  std::string wire;
  wire.reserve(size_line + data.size() + 2);
  wire.append(line, size_line).append(data).append("\r\n", 2);
  return wire;
}

void FrameChunk(std::string* data) {
  char line[kChunkFraming];
  const std::size_t size_line = SizeLine(data->size(), line);
  // No room: a copy of the exact size (growing in place would double it).
  if (data->capacity() - data->size() < size_line + 2) {
    *data = ChunkWire(*data);
    return;
  }
  data->insert(0, line, size_line);
  data->append("\r\n", 2);
}

}  // namespace sightline::api::http_internal
