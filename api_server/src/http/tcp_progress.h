// How far a peer has read a TCP connection, from the kernel's own count.
// Internal to api_server.
//
// Why: a write that waits for the socket to become writable says nothing
// about whether the client reads. Linux reports a socket writable only once
// a third or so of its send buffer has drained, and autotuning grows that
// buffer to net.ipv4.tcp_wmem's maximum (4 MiB by default, far more on
// tuned hosts). A client reading steadily but slower than that buffer
// divided by the write deadline sees no write complete within the deadline.
// The bytes it acknowledged do move, so they are what "progress" means.
#pragma once

#include <cstdint>
#include <optional>

namespace sightline::api::http_internal {

// Bytes of the connection on `fd` that the peer has acknowledged so far
// (TCP_INFO's tcpi_bytes_acked, Linux 4.1+). Monotonic for one connection.
// nullopt where the kernel does not report it (not TCP, older kernel).
std::optional<std::uint64_t> TcpBytesAcked(int fd);

}  // namespace sightline::api::http_internal
