#include "sightline/ipc/output_receiver.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace sightline::ipc {

namespace {

constexpr std::size_t kInitialBuffer = 256 * 1024;

std::uint32_t LoadLength(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

}  // namespace

OutputReceiver::OutputReceiver(std::string address, std::string identity)
    : address_(std::move(address)), identity_(std::move(identity)) {}

OutputReceiver::~OutputReceiver() {
  Close();
}

void OutputReceiver::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  filled_ = 0;
}

bool OutputReceiver::Connect() {
  if (fd_ >= 0) return false;
  sockaddr_un addr;
  socklen_t length;
  if (!ParseUnixAddress(address_, &addr, &length).ok() || identity_.size() > kMaxHelloFrame)
    return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A Unix socket connects at once or not at all: nobody listening
  // (ENOENT, ECONNREFUSED) or a full backlog (EAGAIN) is tried again later.
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    ::close(fd);
    return false;
  }
  std::uint8_t hello[4 + kMaxHelloFrame];
  const auto n = static_cast<std::uint32_t>(identity_.size());
  for (int i = 0; i < 4; ++i) hello[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::memcpy(hello + 4, identity_.data(), n);
  // A new socket's buffer takes a few bytes whole.
  if (::send(fd, hello, 4 + n, MSG_NOSIGNAL) != static_cast<ssize_t>(4 + n)) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  filled_ = 0;
  if (buffer_.size() < kInitialBuffer) buffer_.resize(kInitialBuffer);
  return true;
}

bool OutputReceiver::Read(const std::function<void(std::span<const std::uint8_t>)>& frame) {
  while (fd_ >= 0) {
    const std::size_t room = buffer_.size() - filled_;
    const ssize_t n = ::read(fd_, buffer_.data() + filled_, room);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) break;  // the engine closed its end, or the connection failed
    filled_ += static_cast<std::size_t>(n);
    // Every whole frame, in order; a partial one moves to the front.
    std::size_t at = 0;
    while (filled_ - at >= 4) {
      const std::uint32_t length = LoadLength(buffer_.data() + at);
      if (length > kMaxOutputFrame) {  // not the engine's: end the connection
        Close();
        return false;
      }
      if (filled_ - at - 4 < length) {
        if (4 + std::size_t{length} > buffer_.size()) buffer_.resize(4 + std::size_t{length});
        break;
      }
      frame({buffer_.data() + at + 4, length});
      at += 4 + std::size_t{length};
    }
    if (at > 0) {
      std::memmove(buffer_.data(), buffer_.data() + at, filled_ - at);
      filled_ -= at;
    }
    // A read that did not fill the room took everything there was.
    if (static_cast<std::size_t>(n) < room) return true;
  }
  Close();
  return false;
}

}  // namespace sightline::ipc
