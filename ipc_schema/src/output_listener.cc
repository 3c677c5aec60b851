#include "sightline/ipc/output_listener.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace sightline::ipc {

namespace {

void StoreLength(std::uint32_t n, std::uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(n >> (8 * i));
}

}  // namespace

struct OutputListener::Impl {
  struct Connection {
    int fd = -1;
    std::string identity;          // empty until its hello came
    std::vector<std::uint8_t> in;  // the hello's bytes so far
    // Frames (with their lengths) the socket did not take yet: [head, end).
    std::vector<std::uint8_t> out;
    std::size_t out_head = 0;
    short revents = 0;  // what the last Wait found
    bool closed = false;
    std::size_t queued() const { return out.size() - out_head; }
  };

  int listen_fd = -1;
  std::string socket_file;  // removed at the end ("" for an abstract name)
  short listen_revents = 0;
  std::vector<std::unique_ptr<Connection>> connections;
  std::unordered_map<std::string, Connection*> by_identity;  // those with a hello
  std::vector<pollfd> fds;

  ~Impl() {
    for (auto& c : connections)
      if (c->fd >= 0) ::close(c->fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (!socket_file.empty()) ::unlink(socket_file.c_str());
  }

  void Close(Connection& c) {
    if (c.closed) return;
    c.closed = true;
    if (!c.identity.empty()) {
      auto it = by_identity.find(c.identity);
      if (it != by_identity.end() && it->second == &c) by_identity.erase(it);
    }
    ::close(c.fd);
    c.fd = -1;
    c.out.clear();
    c.out_head = 0;
  }

  // Writes what waits for `c` until its socket is full; false once it failed.
  bool WriteQueued(Connection& c) {
    while (c.queued() > 0) {
      const ssize_t n =
          ::send(c.fd, c.out.data() + c.out_head, c.queued(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0) {
        Close(c);
        return false;
      }
      c.out_head += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.out_head = 0;
    return true;
  }

  // What was written leaves the front once it is most of the vector, so
  // that a reader that keeps up only slowly does not grow it for ever.
  static void Compact(Connection& c) {
    if (c.out_head < 64 * 1024 || c.out_head < c.out.size() / 2) return;
    c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_head));
    c.out_head = 0;
  }

  // Reads what the peer sent: the hello, or after it only the end of the
  // connection (anything else is not the protocol and is discarded).
  void ReadFrom(Connection& c) {
    std::uint8_t buffer[256];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        Close(c);
        return;
      }
      if (!c.identity.empty()) continue;
      c.in.insert(c.in.end(), buffer, buffer + n);
      if (c.in.size() < 4) continue;
      const std::uint32_t length = static_cast<std::uint32_t>(c.in[0]) | c.in[1] << 8 |
                                   c.in[2] << 16 | static_cast<std::uint32_t>(c.in[3]) << 24;
      if (length == 0 || length > kMaxHelloFrame) {
        Close(c);
        return;
      }
      if (c.in.size() < 4 + std::size_t{length}) continue;
      c.identity.assign(reinterpret_cast<const char*>(c.in.data() + 4), length);
      c.in.clear();
      // The newer connection of a process replaces the older one.
      auto [it, added] = by_identity.emplace(c.identity, &c);
      if (!added) {
        Connection* old = it->second;
        it->second = &c;
        old->identity.clear();  // so that closing it leaves the new one mapped
        Close(*old);
      }
    }
  }

  // New connections and whatever hellos they already sent.
  void Accept() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or out of descriptors: tried again on the next readiness
      }
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      connections.push_back(std::move(c));
      ReadFrom(*connections.back());
    }
  }

  void Sweep() {
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c->closed; });
  }
};

OutputListener::OutputListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OutputListener::~OutputListener() = default;

Status OutputListener::Listen(const std::string& address, std::unique_ptr<OutputListener>* out) {
  sockaddr_un addr;
  socklen_t length;
  if (Status s = ParseUnixAddress(address, &addr, &length); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0)
    return Status::IoError("engine output socket: " + std::string(std::strerror(errno)));
  if (addr.sun_path[0] != '\0') {
    // The socket a killed engine left there (ZeroMQ removed whatever was
    // there; anything but a socket is left alone, and bind then fails).
    struct stat st;
    if (::lstat(addr.sun_path, &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(addr.sun_path);
    impl->socket_file = addr.sun_path;
  }
  if (::bind(impl->listen_fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      ::listen(impl->listen_fd, 128) != 0) {
    const std::string error = std::strerror(errno);
    impl->socket_file.clear();  // not ours to remove
    return Status::IoError("cannot listen at " + address + ": " + error);
  }
  out->reset(new OutputListener(std::move(impl)));
  return Status::Ok();
}

bool OutputListener::Send(std::string_view identity, std::span<const std::uint8_t> frame) {
  auto it = impl_->by_identity.find(std::string(identity));
  if (it == impl_->by_identity.end()) {
    // Perhaps its connection is only waiting to be taken (a READY answers
    // the first heartbeat, which may come before the output thread ran).
    impl_->Accept();
    it = impl_->by_identity.find(std::string(identity));
    if (it == impl_->by_identity.end()) return false;
  }
  Impl::Connection& c = *it->second;
  std::uint8_t length[4];
  StoreLength(static_cast<std::uint32_t>(frame.size()), length);
  std::size_t written = 0;
  // A busy output thread may not Wait for a while: what waited goes first.
  if (c.queued() > 0 && !impl_->WriteQueued(c)) {
    impl_->Sweep();
    return false;
  }
  if (c.queued() == 0) {  // one system call for the length and the frame
    iovec parts[2] = {{length, sizeof length},
                      {const_cast<std::uint8_t*>(frame.data()), frame.size()}};
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = 2;
    ssize_t n;
    do n = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      impl_->Close(c);
      impl_->Sweep();
      return false;
    }
    written = n < 0 ? 0 : static_cast<std::size_t>(n);
  }
  // What the socket did not take waits, in order.
  if (written < sizeof length) c.out.insert(c.out.end(), length + written, length + sizeof length);
  const std::size_t frame_written = written > sizeof length ? written - sizeof length : 0;
  c.out.insert(c.out.end(), frame.begin() + static_cast<std::ptrdiff_t>(frame_written),
               frame.end());
  Impl::Compact(c);
  return true;
}

bool OutputListener::Wait(int wake_fd, int timeout_ms) {
  Impl& s = *impl_;
  s.fds.clear();
  s.fds.push_back({s.listen_fd, POLLIN, 0});
  for (const auto& c : s.connections)
    s.fds.push_back({c->fd, static_cast<short>(POLLIN | (c->queued() ? POLLOUT : 0)), 0});
  if (wake_fd >= 0) s.fds.push_back({wake_fd, POLLIN, 0});
  int n;
  do n = ::poll(s.fds.data(), s.fds.size(), timeout_ms);
  while (n < 0 && errno == EINTR);
  s.listen_revents = s.fds[0].revents;
  for (std::size_t i = 0; i < s.connections.size(); ++i)
    s.connections[i]->revents = s.fds[1 + i].revents;
  return wake_fd >= 0 && (s.fds.back().revents & POLLIN);
}

void OutputListener::Service() {
  Impl& s = *impl_;
  for (std::size_t i = 0; i < s.connections.size(); ++i) {  // Accept may add: by index
    Impl::Connection& c = *s.connections[i];
    const short r = c.revents;
    c.revents = 0;
    if (c.closed) continue;
    if (r & (POLLIN | POLLHUP | POLLERR)) s.ReadFrom(c);
    if (!c.closed && (r & POLLOUT)) s.WriteQueued(c);
  }
  if (s.listen_revents & POLLIN) s.Accept();
  s.listen_revents = 0;
  s.Sweep();
}

void OutputListener::Flush(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool waiting = false;
    for (auto& c : impl_->connections)
      if (!c->closed && c->queued() && impl_->WriteQueued(*c) && c->queued()) waiting = true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!waiting || left.count() <= 0) break;
    Wait(-1, static_cast<int>(left.count()));
    Service();
  }
  impl_->Sweep();
}

std::size_t OutputListener::connections() const {
  return impl_->by_identity.size();
}

std::size_t OutputListener::queued_bytes() const {
  std::size_t n = 0;
  for (const auto& c : impl_->connections) n += c->queued();
  return n;
}

}  // namespace sightline::ipc
