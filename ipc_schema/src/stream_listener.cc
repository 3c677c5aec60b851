#include "sightline/ipc/stream_listener.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "frame_reader.h"
#include "frame_writer.h"

namespace sightline::ipc {

struct StreamListener::Impl {
  struct Connection {
    int fd = -1;
    std::string identity;  // empty until its hello came
    FrameReader reader;
    std::vector<std::uint8_t> out;  // queued, not yet written: [out_head, end)
    std::size_t out_head = 0;
    std::chrono::steady_clock::time_point accepted;
    short revents = 0;  // what the last Wait found
    bool closed = false;
    std::size_t queued() const { return out.size() - out_head; }
  };

  int listen_fd = -1;
  // Removed at the end if it is still ours ("" for an abstract name): a
  // successor at the same path may have replaced it while this one flushed.
  std::string socket_file;
  dev_t socket_dev = 0;
  ino_t socket_ino = 0;
  short listen_revents = 0;
  // accept() out of descriptors or memory leaves the socket readable: it is
  // left out of the wait until then, not polled in a busy loop.
  std::chrono::steady_clock::time_point accept_paused_until{};
  std::chrono::milliseconds hello_timeout{30000};
  std::vector<std::unique_ptr<Connection>> connections;
  // Those with a hello, looked up by string_view: no string per frame sent.
  struct IdentityHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  std::unordered_map<std::string, Connection*, IdentityHash, std::equal_to<>> by_identity;
  std::vector<pollfd> fds;

  ~Impl() {
    for (auto& c : connections)
      if (c->fd >= 0) ::close(c->fd);
    if (listen_fd >= 0) ::close(listen_fd);
    struct stat st;
    if (!socket_file.empty() && ::lstat(socket_file.c_str(), &st) == 0 && st.st_dev == socket_dev &&
        st.st_ino == socket_ino)
      ::unlink(socket_file.c_str());
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

  // The hello names the connection; the newer connection of a process
  // replaces the older one.
  void Hello(Connection& c, std::span<const std::uint8_t> hello) {
    c.identity.assign(reinterpret_cast<const char*>(hello.data()), hello.size());
    c.reader.set_max_frame(kMaxFrame);
    auto [it, added] = by_identity.emplace(c.identity, &c);
    if (!added) {
      Connection* old = it->second;
      it->second = &c;
      old->identity.clear();  // so that closing it leaves the new one mapped
      Close(*old);
    }
  }

  // Reads what the peer sent: its hello, then its frames (or, on a socket
  // the engine only writes, the end of the connection).
  void ReadFrom(Connection& c, const FrameFn& frame) {
    bool bad = false;
    // One read() per connection and pass: every API server gets its turn
    // (ZeroMQ's ROUTER took turns between its peers too).
    const FrameReader::Result r = c.reader.Read(
        c.fd,
        [&](std::span<const std::uint8_t> f) {
          if (bad) return;
          if (!c.identity.empty()) {
            if (frame) frame(c.identity, f);
          } else if (f.empty()) {
            bad = true;  // no identity
          } else {
            Hello(c, f);
          }
        },
        /*drain=*/false);
    if (bad || r != FrameReader::Result::kMore) Close(c);
  }

  // New connections and whatever they already sent.
  void Accept(const FrameFn& frame) {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)  // EMFILE, ENFILE, ENOBUFS, ENOMEM
          accept_paused_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        return;
      }
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->accepted = std::chrono::steady_clock::now();
      c->reader.set_max_frame(kMaxHelloFrame);
      connections.push_back(std::move(c));
      ReadFrom(*connections.back(), frame);
    }
  }

  void Sweep() {
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c->closed; });
  }
};

StreamListener::StreamListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StreamListener::~StreamListener() = default;

Status StreamListener::Listen(const std::string& address, std::unique_ptr<StreamListener>* out,
                              int hello_timeout_ms) {
  sockaddr_un addr;
  socklen_t length;
  if (Status s = ParseUnixAddress(address, &addr, &length); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->hello_timeout = std::chrono::milliseconds(hello_timeout_ms);
  impl->listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0)
    return Status::IoError("socket for " + address + ": " + std::string(std::strerror(errno)));
  if (addr.sun_path[0] != '\0') {
    // The socket a killed engine left there (ZeroMQ removed whatever was
    // there; anything but a socket is left alone, and bind then fails).
    struct stat st;
    if (::lstat(addr.sun_path, &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(addr.sun_path);
  }
  if (::bind(impl->listen_fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      ::listen(impl->listen_fd, 128) != 0)
    return Status::IoError("cannot listen at " + address + ": " + std::strerror(errno));
  struct stat st;
  if (addr.sun_path[0] != '\0' && ::lstat(addr.sun_path, &st) == 0) {
    impl->socket_file = addr.sun_path;
    impl->socket_dev = st.st_dev;
    impl->socket_ino = st.st_ino;
  }
  out->reset(new StreamListener(std::move(impl)));
  return Status::Ok();
}

bool StreamListener::Send(std::string_view identity, std::span<const std::uint8_t> frame) {
  Impl& s = *impl_;
  // Its connection; or, when there is none or it turns out to be over, the
  // next one the process made, if it is only waiting to be taken (a READY
  // answers the first heartbeat, which may come before this thread looked).
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = s.by_identity.find(identity);
    if (it == s.by_identity.end()) {
      s.Accept(nullptr);
      it = s.by_identity.find(identity);
      if (it == s.by_identity.end()) return false;
    }
    Impl::Connection& c = *it->second;
    if (SendFrame(c.fd, frame, &c.out, &c.out_head)) return true;
    s.Close(c);
    s.Sweep();
  }
  return false;
}

bool StreamListener::Wait(int wake_fd, int timeout_ms) {
  Impl& s = *impl_;
  s.fds.clear();
  const bool accepting = std::chrono::steady_clock::now() >= s.accept_paused_until;
  s.fds.push_back({accepting ? s.listen_fd : -1, POLLIN, 0});
  if (!accepting)  // back in the wait once the pause ends
    timeout_ms = std::min<int>(timeout_ms < 0 ? 100 : timeout_ms, 100);
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

void StreamListener::Service(const FrameFn& frame) {
  Impl& s = *impl_;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < s.connections.size(); ++i) {  // Accept may add: by index
    Impl::Connection& c = *s.connections[i];
    const short r = c.revents;
    c.revents = 0;
    if (c.closed) continue;
    if (r & (POLLIN | POLLHUP | POLLERR)) s.ReadFrom(c, frame);
    if (!c.closed && (r & POLLOUT) && !WriteQueuedFrames(c.fd, &c.out, &c.out_head)) s.Close(c);
    // After the read: a hello that waited in the socket while this thread
    // did not run is taken, not timed out.
    if (!c.closed && c.identity.empty() && now - c.accepted > s.hello_timeout) s.Close(c);
  }
  if (s.listen_revents & POLLIN) s.Accept(frame);
  s.listen_revents = 0;
  s.Sweep();
}

void StreamListener::Flush(int timeout_ms) {
  Impl& s = *impl_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool waiting = false;
    for (auto& c : s.connections) {
      if (c->closed || c->queued() == 0) continue;
      if (!WriteQueuedFrames(c->fd, &c->out, &c->out_head))
        s.Close(*c);
      else if (c->queued() > 0)
        waiting = true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!waiting || left.count() <= 0) break;
    Wait(-1, static_cast<int>(left.count()));
    Service();
  }
  s.Sweep();
}

std::size_t StreamListener::connections() const {
  return impl_->by_identity.size();
}

std::size_t StreamListener::queued_bytes() const {
  std::size_t n = 0;
  for (const auto& c : impl_->connections) n += c->queued();
  return n;
}

}  // namespace sightline::ipc
