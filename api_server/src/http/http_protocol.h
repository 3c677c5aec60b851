// HTTP/1.1 message rules the server applies on top of Beast's parser
// (RFC 9110, RFC 9112): request targets, transfer codings, Bearer
// credentials, chunk framing. Pure functions over bytes, so that every rule
// can be tested (and fuzzed) without a socket.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sightline::api::http_internal {

// Splits a request target into path and query. Origin-form ("/p?q") and
// absolute-form ("http://host/p?q", RFC 9112 §3.2.2: a server MUST accept it)
// both yield "/p" and "q"; an absolute-form target without a path yields "/".
// Any other form is returned as the path unchanged (no route matches it).
void SplitTarget(std::string_view target, std::string* path, std::string* query);

// How a request's Transfer-Encoding fields (every field's value, in order)
// frame its body. Only a single "chunked" is understood: anything else
// (gzip, "chunked, gzip", "chunked, chunked") is unsupported and must be
// refused before the body is read, since Beast would otherwise take the body
// as empty and parse it as the next request.
enum class TransferCoding { kNone, kChunked, kUnsupported };
TransferCoding ClassifyTransferEncoding(const std::vector<std::string_view>& values);

// True when an Authorization value is the Bearer credential `key`
// (RFC 9110 §11.4: the scheme is case-insensitive; 1*SP before the token).
// The comparison of the token takes time independent of where it differs.
bool BearerMatches(std::string_view authorization, std::string_view key);

// Whether an Accept-Encoding value accepts gzip (RFC 9110 §12.5.3): "gzip"
// or "x-gzip" listed with a weight above 0 (none: 1), or else "*" so. A
// weight of 0 refuses it. (prometheus_client compresses whenever "gzip" is
// listed, weight ignored.)
bool AcceptsGzip(std::string_view accept_encoding);

// ASCII case-insensitive equality.
bool IEquals(std::string_view a, std::string_view b);

// One chunk of a chunked body on the wire: hex size, CRLF, data, CRLF
// (RFC 9112 §7.1); one allocation, one copy.
std::string ChunkWire(std::string_view data);
// The same in place: *data becomes its chunk. The bytes move up by the size
// line; no allocation when *data has kChunkFraming bytes of spare capacity
// (EventTemplate::Fill reserves them: a streamed token's chunk is framed
// once per token).
void FrameChunk(std::string* data);
constexpr std::size_t kChunkFraming = 16 + 4;  // a 64-bit size in hex, two CRLFs

}  // namespace sightline::api::http_internal
