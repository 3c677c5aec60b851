// Raw HTTP exchanges for hostile tests: exact bytes out (anything a client
// or attacker could send, invalid or not), everything the server sends back
// until it closes or a deadline passes. Test support, header-only.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace sightline::testing {

// A connected loopback TCP socket, closed on destruction. (Not named
// RawConnection: tests/api_server/http_raw_client.h has a class of that name
// in this namespace, and a test binary that saw both would break the one
// definition rule: the linker keeps one set of inline members for two
// layouts, which LeakSanitizer caught as leaks.)
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() { Close(); }
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_), eof_(o.eof_) { o.fd_ = -1; }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool Send(const std::string& bytes) {
    std::size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Reads what arrives until the peer closes, `stop` appears in what was
  // read, or `timeout_s` passes.
  std::string ReadUntil(double timeout_s, const std::string& stop = "") {
    std::string out;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      if (!stop.empty() && out.find(stop) != std::string::npos) return out;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      const std::string got = Recv();
      if (got.empty()) return out;
      out += got;
    }
  }
  // What one read returns once bytes arrive within `timeout_s` ("" if none
  // do, or the peer closed).
  std::string ReadSome(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return {};
    return Recv();
  }
  // True once a read met the peer's orderly close (FIN), not a reset.
  bool eof() const { return eof_; }
  // Hangs up now.
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // True if the peer has closed (or reset) the connection within `timeout_s`.
  bool ClosedWithin(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return false;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
  }

 private:
  std::string Recv() {
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) eof_ = true;
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

  int fd_ = -1;
  bool eof_ = false;
};

// Sends `request` on a new connection and returns the whole answer (the
// server closes, or the deadline passes).
inline std::string RawExchange(int port, const std::string& request, double timeout_s = 10) {
  RawSocket c(port);
  if (!c.ok() || !c.Send(request)) return {};
  return c.ReadUntil(timeout_s);
}

// The status code of the first response in `wire` (0 if none).
inline int StatusOf(const std::string& wire) {
  if (wire.rfind("HTTP/1.", 0) != 0 || wire.size() < 12) return 0;
  return std::atoi(wire.c_str() + 9);
}

// The head (status line and fields) and the body of the last response in
// `wire`, split at the blank line; the body as sent (not de-chunked).
inline std::string HeadOf(const std::string& wire) {
  const std::size_t at = wire.find("\r\n\r\n");
  return at == std::string::npos ? wire : wire.substr(0, at + 2);
}
inline std::string BodyOf(const std::string& wire) {
  const std::size_t at = wire.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : wire.substr(at + 4);
}

}  // namespace sightline::testing
