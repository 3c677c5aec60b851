#include "sightline/ipc/stream_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "frame_reader.h"
#include "frame_writer.h"

namespace sightline::ipc {

StreamConnection::StreamConnection(std::string address, std::string identity)
    : address_(std::move(address)),
      identity_(std::move(identity)),
      reader_(std::make_unique<FrameReader>()) {}

StreamConnection::~StreamConnection() {
  Close();
}

void StreamConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reader_->Reset();
  out_.clear();
  out_head_ = 0;
}

bool StreamConnection::Connect() {
  if (fd_ >= 0) return false;
  sockaddr_un addr;
  socklen_t length;
  if (!ParseUnixAddress(address_, &addr, &length).ok() || identity_.empty() ||
      identity_.size() > kMaxHelloFrame)
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
  StoreFrameLength(n, hello);
  std::memcpy(hello + 4, identity_.data(), n);
  // A new socket's buffer takes a few bytes whole.
  if (::send(fd, hello, 4 + n, MSG_NOSIGNAL) != static_cast<ssize_t>(4 + n)) {
    ::close(fd);
    return false;
  }
  // Who listens: the engine process this connection reaches (SO_PEERCRED
  // gives the listener's credentials as of its listen()).
  ucred peer{};
  socklen_t peer_length = sizeof peer;
  peer_pid_ = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) == 0 ? peer.pid : 0;
  fd_ = fd;
  reader_->Reset();
  out_.clear();
  out_head_ = 0;
  return true;
}

bool StreamConnection::Read(const std::function<void(std::span<const std::uint8_t>)>& frame,
                            bool drain) {
  if (fd_ < 0) return false;
  if (reader_->Read(fd_, frame, drain) == FrameReader::Result::kMore) return true;
  Close();
  return false;
}

bool StreamConnection::Send(std::span<const std::uint8_t> frame) {
  if (fd_ < 0) return false;
  if (SendFrame(fd_, frame, &out_, &out_head_)) return true;
  Close();
  return false;
}

bool StreamConnection::WriteQueued() {
  if (fd_ < 0) return false;
  if (WriteQueuedFrames(fd_, &out_, &out_head_)) return true;
  Close();
  return false;
}

}  // namespace sightline::ipc
