#include "http/tcp_progress.h"

// <linux/tcp.h>, not glibc's <netinet/tcp.h>: glibc 2.36's struct tcp_info
// stops before tcpi_bytes_acked, and the two headers cannot share a file
// (both define struct tcp_info), which is why this is a file of its own.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace sightline::api::http_internal {

std::optional<std::uint64_t> TcpBytesAcked(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  // An older kernel fills less of the struct than these headers describe.
  if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) {
    return std::nullopt;
  }
  return info.tcpi_bytes_acked;
}

}  // namespace sightline::api::http_internal
