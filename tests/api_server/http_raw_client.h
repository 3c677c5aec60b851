// A raw loopback HTTP connection for tests that need bytes a well-behaved
// client would never send, or a client that stops reading. Every wait is
// bounded. Test support, header-only.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace sightline::testing {

class RawConnection {
 public:
  // rcvbuf > 0: a small receive buffer, so that a server writing to a client
  // that never reads blocks soon.
  explicit RawConnection(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<unsigned short>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // The server closed (EOF or reset) during the last read.
  bool closed() const { return closed_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until done(received) holds, the server closes, or timeout_s passes.
  std::string ReadUntil(const std::function<bool(const std::string&)>& done, double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!done(received_)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(buf, static_cast<std::size_t>(n));
    }
    return received_;
  }
  // Everything until the server closes (or timeout_s).
  std::string ReadAll(double timeout_s) {
    return ReadUntil([](const std::string&) { return false; }, timeout_s);
  }
  // Up to the end of the first response header.
  std::string ReadHead(double timeout_s) {
    return ReadUntil([](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; },
                     timeout_s);
  }
  // One response with a Content-Length body; consumes it from what was read.
  std::string ReadResponse(double timeout_s) {
    ReadUntil(
        [](const std::string& s) {
          const std::size_t end = s.find("\r\n\r\n");
          if (end == std::string::npos) return false;
          return s.size() >= end + 4 + ContentLength(s.substr(0, end));
        },
        timeout_s);
    const std::size_t end = received_.find("\r\n\r\n");
    if (end == std::string::npos) return std::exchange(received_, {});
    const std::size_t total =
        std::min(received_.size(), end + 4 + ContentLength(received_.substr(0, end)));
    std::string one = received_.substr(0, total);
    received_.erase(0, total);
    return one;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  static std::size_t ContentLength(const std::string& head) {
    const std::string h = Lower(head);
    const std::size_t at = h.find("\r\ncontent-length:");
    return at == std::string::npos ? 0 : std::stoul(h.substr(at + 17));
  }
  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

 private:
  int fd_ = -1;
  bool connected_ = false, closed_ = false;
  std::string received_;
};

// A response taken apart: status, lower-case header names, body.
struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  bool Has(const std::string& name) const { return headers.count(name) > 0; }
};

inline RawResponse ParseResponse(const std::string& raw) {
  RawResponse r;
  const std::size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  std::size_t line = raw.find("\r\n") + 2;
  while (line < end) {
    const std::size_t next = raw.find("\r\n", line);
    const std::string field = raw.substr(line, next - line);
    const std::size_t colon = field.find(':');
    std::string value = field.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r.headers[RawConnection::Lower(field.substr(0, colon))] = value;
    line = next + 2;
  }
  r.body = raw.substr(end + 4);
  return r;
}

}  // namespace sightline::testing
