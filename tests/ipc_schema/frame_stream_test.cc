// The engine <-> API-server transport (sightline/ipc/frame_stream.h): frames
// arrive whole, in order and only at their owner (or from their sender),
// whatever their sizes and however slowly the reader reads; the end of a
// connection comes after every frame sent before it; what is not the
// protocol ends only its own connection.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "sightline/ipc/stream_connection.h"
#include "sightline/ipc/stream_listener.h"

namespace sightline::ipc {
namespace frame_stream_test {

using Frame = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

// A socket path of this test's own, removed with it (in /tmp, not $TMPDIR:
// a socket's path must fit in 107 bytes).
class SocketPath {
 public:
  SocketPath() {
    static std::atomic<int> n{0};
    path_ = "/tmp/sightline-frames-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  }
  ~SocketPath() { std::filesystem::remove(path_); }
  std::string address() const { return "ipc://" + path_.string(); }
  const std::filesystem::path& path() const { return path_; }
  // A plain socket connected, or bound (and listening) there, for the
  // tests that speak raw bytes; -1 if that failed.
  int RawConnect() const { return Raw(::connect); }
  int RawListen() const {
    const int fd = Raw(::bind);
    if (fd >= 0 && ::listen(fd, 4) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

 private:
  int Raw(int (*op)(int, const sockaddr*, socklen_t)) const {
    sockaddr_un a;
    socklen_t n;
    if (!ParseUnixAddress(address(), &a, &n).ok()) return -1;
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && op(fd, reinterpret_cast<const sockaddr*>(&a), n) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  std::filesystem::path path_;
};

// A new socket's send buffer on this host (what the listener's accepted
// sockets get): what fits there is written at once, the rest is queued.
std::size_t DefaultSendBuffer() {
  std::FILE* f = std::fopen("/proc/sys/net/core/wmem_default", "r");
  unsigned long n = 212992;  // Linux's usual default
  if (f) {
    if (std::fscanf(f, "%lu", &n) != 1) n = 212992;
    std::fclose(f);
  }
  return n;
}

std::unique_ptr<StreamListener> ListenAt(const std::string& address) {
  std::unique_ptr<StreamListener> l;
  const Status s = StreamListener::Listen(address, &l);
  EXPECT_TRUE(s.ok()) << s.message();
  return l;
}

// Frame i of a corpus: its size drawn from the seed (mostly an engine
// step's few kilobytes, now and then empty or megabytes), its bytes from i.
Frame CorpusFrame(std::mt19937& rng, std::size_t i) {
  const std::uint32_t kind = rng() % 10;
  std::size_t size = rng() % 16384;
  if (kind == 0) size = 0;
  if (kind == 1) size = rng() % 4;                           // shorter than a length
  if (kind == 2) size = 200 * 1024 + rng() % (1024 * 1024);  // past a socket's buffer
  Frame f(size);
  for (std::size_t j = 0; j < size; ++j) f[j] = static_cast<std::uint8_t>(i * 131 + j * 7);
  return f;
}

// Reads `r` until `want` frames came, the connection ended, or the deadline.
// Returns whether the connection is still up.
bool ReadFrames(StreamConnection& r, std::vector<Frame>* got, std::size_t want,
                std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  const auto deadline = Clock::now() + limit;
  while (got->size() < want && Clock::now() < deadline) {
    pollfd p{r.fd(), POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (!r.Read([&](std::span<const std::uint8_t> f) { got->emplace_back(f.begin(), f.end()); }))
      return false;
  }
  return r.connected();
}

// Keeps `l` writing what waits until nothing does (or the deadline).
void Drain(StreamListener& l) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (l.queued_bytes() > 0 && Clock::now() < deadline) {
    l.Wait(-1, 50);
    l.Service();
  }
}

TEST(FrameStream, AddressesTakeOnlyIpcPaths) {
  sockaddr_un a;
  socklen_t n;
  for (const char* bad : {"tcp://127.0.0.1:5555", "inproc://x", "ipc://", "ipc://@", "ipc://*",
                          "/tmp/x", "IPC:///tmp/x"})
    EXPECT_FALSE(ParseUnixAddress(bad, &a, &n).ok()) << bad;
  EXPECT_FALSE(ParseUnixAddress("ipc:///" + std::string(sizeof a.sun_path, 'x'), &a, &n).ok());
  EXPECT_FALSE(ParseUnixAddress(std::string("ipc:///tmp/a\0b", 14), &a, &n).ok());

  ASSERT_TRUE(ParseUnixAddress("ipc:///tmp/engine0.out", &a, &n).ok());
  EXPECT_STREQ(a.sun_path, "/tmp/engine0.out");
  EXPECT_EQ(n, offsetof(sockaddr_un, sun_path) + 17);
  ASSERT_TRUE(ParseUnixAddress("ipc://@engine0", &a, &n).ok());  // the abstract namespace
  EXPECT_EQ(a.sun_path[0], '\0');
  EXPECT_EQ(std::memcmp(a.sun_path + 1, "engine0", 7), 0);
  EXPECT_EQ(n, offsetof(sockaddr_un, sun_path) + 8);

  std::unique_ptr<StreamListener> l;
  const Status s = StreamListener::Listen("tcp://127.0.0.1:5555", &l);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ipc://"), std::string::npos) << s.message();
}

TEST(FrameStream, FramesArriveWholeAndInOrderWhateverTheirSizes) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection r(path.address(), "c0.1");
  ASSERT_TRUE(r.Connect());

  std::mt19937 rng(46);
  std::vector<Frame> sent;
  for (std::size_t i = 0; i < 400; ++i) sent.push_back(CorpusFrame(rng, i));
  std::size_t most_queued = 0;
  std::thread engine([&] {
    for (const Frame& f : sent) {
      EXPECT_TRUE(listener->Send("c0.1", f));
      most_queued = std::max(most_queued, listener->queued_bytes());
    }
    Drain(*listener);
  });
  std::vector<Frame> got;
  EXPECT_TRUE(ReadFrames(r, &got, sent.size()));
  engine.join();
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) ASSERT_EQ(got[i], sent[i]) << "frame " << i;
  // Frames larger than the socket's buffer: the queue was exercised.
  std::size_t largest = 0;
  for (const Frame& f : sent) largest = std::max(largest, f.size());
  if (largest > DefaultSendBuffer()) {
    EXPECT_GT(most_queued, 0u);
  }
  EXPECT_EQ(listener->queued_bytes(), 0u);
}

// Keeps `c` writing what it queued until nothing waits (or the deadline).
void DrainConnection(StreamConnection& c) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (c.wants_write() && Clock::now() < deadline) {
    pollfd p{c.fd(), POLLOUT, 0};
    (void)::poll(&p, 1, 50);
    ASSERT_TRUE(c.WriteQueued());
  }
}

// The engine's input: several API servers send at once, each with frames of
// every size, while the engine reads now and then.
TEST(FrameStream, FramesFromEachSenderArriveWholeInItsOrderUnderItsIdentity) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  const std::vector<std::string> identities = {"c0.1", "c1.2", "c2.3"};
  std::vector<std::vector<Frame>> sent(identities.size());
  std::mt19937 rng(4646);
  for (auto& frames : sent)
    for (std::size_t i = 0; i < 150; ++i) frames.push_back(CorpusFrame(rng, i));
  std::map<std::string, std::vector<Frame>> got;
  std::atomic<std::size_t> total{0};
  std::size_t want = 0;
  for (const auto& frames : sent) want += frames.size();
  std::vector<std::thread> senders;
  std::vector<std::size_t> most_queued(identities.size());
  for (std::size_t k = 0; k < identities.size(); ++k)
    senders.emplace_back([&, k] {
      StreamConnection c(path.address(), identities[k]);
      ASSERT_TRUE(c.Connect());
      // A small socket buffer, whatever the host's default: the queue is used.
      const int small = 16 * 1024;
      ASSERT_EQ(::setsockopt(c.fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
      for (const Frame& f : sent[k]) {
        ASSERT_TRUE(c.Send(f));
        most_queued[k] = std::max(most_queued[k], c.queued_bytes());
      }
      DrainConnection(c);
      // Stays connected until the engine has read it all (a close may not
      // overtake what the socket still holds, but the test says so anyway).
      while (total < want) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (total < want && Clock::now() < deadline) {
    listener->Wait(-1, 50);
    listener->Service([&](std::string_view identity, std::span<const std::uint8_t> f) {
      got[std::string(identity)].emplace_back(f.begin(), f.end());
      ++total;
    });
  }
  const std::size_t read = total;
  total = want;  // the senders may go
  for (auto& t : senders) t.join();
  EXPECT_EQ(read, want);
  for (std::size_t k = 0; k < identities.size(); ++k) {
    ASSERT_EQ(got[identities[k]].size(), sent[k].size()) << identities[k];
    for (std::size_t i = 0; i < sent[k].size(); ++i)
      ASSERT_EQ(got[identities[k]][i], sent[k][i]) << identities[k] << " frame " << i;
    EXPECT_GT(most_queued[k], 0u) << "the sender's queue was never used";
  }
  StreamConnection never(path.address() + "-nobody", "c9.9");
  EXPECT_FALSE(never.Connect());
  EXPECT_FALSE(never.Send(Frame{1}));  // not connected
}

TEST(FrameStream, AStalledReaderLosesNothing) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection r(path.address(), "c1.2");
  ASSERT_TRUE(r.Connect());
  // Far more than the socket holds, sent while nobody reads.
  std::vector<Frame> sent;
  const std::size_t n = std::max<std::size_t>(4000, 3 * DefaultSendBuffer() / 1000);
  for (std::size_t i = 0; i < n; ++i) sent.push_back(Frame(1000 + i % 97, std::uint8_t(i)));
  for (const Frame& f : sent) ASSERT_TRUE(listener->Send("c1.2", f));
  EXPECT_GT(listener->queued_bytes(), 0u);
  std::thread engine([&] { Drain(*listener); });
  std::vector<Frame> got;
  EXPECT_TRUE(ReadFrames(r, &got, sent.size()));
  engine.join();
  EXPECT_EQ(got, sent);
}

TEST(FrameStream, FramesGoOnlyToTheirIdentity) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection a(path.address(), "c0.a"), b(path.address(), "c1.b");
  ASSERT_TRUE(a.Connect());
  ASSERT_TRUE(b.Connect());
  EXPECT_FALSE(listener->Send("c2.c", Frame{1, 2, 3}));  // nobody: dropped
  EXPECT_TRUE(listener->Send("c1.b", Frame{'b'}));
  EXPECT_TRUE(listener->Send("c0.a", Frame{'a'}));
  EXPECT_EQ(listener->connections(), 2u);
  std::vector<Frame> got_a, got_b;
  EXPECT_TRUE(ReadFrames(a, &got_a, 1));
  EXPECT_TRUE(ReadFrames(b, &got_b, 1));
  EXPECT_EQ(got_a, std::vector<Frame>{Frame{'a'}});
  EXPECT_EQ(got_b, std::vector<Frame>{Frame{'b'}});
  // Nothing more came to either.
  EXPECT_TRUE(ReadFrames(a, &got_a, 2, std::chrono::milliseconds(200)));
  EXPECT_EQ(got_a.size(), 1u);
}

TEST(FrameStream, ASecondConnectionOfAnIdentityReplacesTheFirst) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection first(path.address(), "c3.1");
  ASSERT_TRUE(first.Connect());
  ASSERT_TRUE(listener->Send("c3.1", Frame{1}));
  StreamConnection second(path.address(), "c3.1");
  ASSERT_TRUE(second.Connect());
  // Taken when the listener next looks (here: a wait, as the engine's loop).
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::vector<Frame> got_first;
  bool first_up = true;
  while (first_up && Clock::now() < deadline) {
    listener->Wait(-1, 20);
    listener->Service();
    first_up = ReadFrames(first, &got_first, 2, std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(first_up) << "the replaced connection was not closed";
  EXPECT_EQ(got_first, std::vector<Frame>{Frame{1}});  // what it had, it got
  ASSERT_TRUE(listener->Send("c3.1", Frame{2}));
  std::vector<Frame> got_second;
  EXPECT_TRUE(ReadFrames(second, &got_second, 1));
  EXPECT_EQ(got_second, std::vector<Frame>{Frame{2}});
  EXPECT_EQ(listener->connections(), 1u);
}

TEST(FrameStream, TheEndComesAfterEveryFrameAndAnotherListenerIsFoundAgain) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection r(path.address(), "c0.5");
  ASSERT_TRUE(r.Connect());
  EXPECT_FALSE(r.Connect());  // already connected
  std::vector<Frame> sent;
  for (std::size_t i = 0; i < 300; ++i) sent.push_back(Frame(3000, std::uint8_t(i)));
  for (const Frame& f : sent) ASSERT_TRUE(listener->Send("c0.5", f));
  std::thread engine([&] {
    listener->Flush(30000);
    listener.reset();  // the engine exits
  });
  std::vector<Frame> got;
  const bool up = ReadFrames(r, &got, sent.size() + 1);
  engine.join();
  EXPECT_FALSE(up);
  EXPECT_FALSE(r.connected());
  EXPECT_EQ(r.fd(), -1);
  EXPECT_EQ(got, sent);
  EXPECT_FALSE(std::filesystem::exists(path.path())) << "the socket file stays";
  EXPECT_FALSE(r.Connect());  // nobody listens

  // A new engine at the address: the receiver finds it.
  auto next = ListenAt(path.address());
  ASSERT_TRUE(next);
  ASSERT_TRUE(r.Connect());
  ASSERT_TRUE(next->Send("c0.5", Frame{9}));
  got.clear();
  EXPECT_TRUE(ReadFrames(r, &got, 1));
  EXPECT_EQ(got, std::vector<Frame>{Frame{9}});
}

TEST(FrameStream, AStaleSocketFileIsReplacedAndAnythingElseIsNot) {
  SocketPath path;
  {
    // A socket bound there whose process is gone: what a killed engine leaves.
    const int fd = path.RawListen();
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  ASSERT_TRUE(std::filesystem::exists(path.path()));
  EXPECT_TRUE(ListenAt(path.address()));

  SocketPath file;
  {
    std::FILE* f = std::fopen(file.path().c_str(), "w");
    ASSERT_TRUE(f);
    std::fclose(f);
  }
  std::unique_ptr<StreamListener> l;
  EXPECT_FALSE(StreamListener::Listen(file.address(), &l).ok());
  EXPECT_TRUE(std::filesystem::is_regular_file(file.path())) << "a file was removed";
}

// An engine that leaves after a successor took its address (it was still
// flushing) leaves the successor's socket where it is.
TEST(FrameStream, AnEngineLeavingKeepsItsSuccessorsSocket) {
  SocketPath path;
  auto first = ListenAt(path.address());
  auto second = ListenAt(path.address());
  ASSERT_TRUE(first && second);
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path.path()));
  StreamConnection r(path.address(), "c0.3");
  ASSERT_TRUE(r.Connect());
  ASSERT_TRUE(second->Send("c0.3", Frame{5}));
  std::vector<Frame> got;
  EXPECT_TRUE(ReadFrames(r, &got, 1));
  EXPECT_EQ(got, std::vector<Frame>{Frame{5}});
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(path.path())) << "its own socket stays";
}

// Raw bytes to the listener: what is not a hello ends that connection only.
TEST(FrameStream, ABadHelloEndsOnlyItsOwnConnection) {
  SocketPath path;
  auto listener = ListenAt(path.address());
  ASSERT_TRUE(listener);
  StreamConnection good(path.address(), "c0.9");
  ASSERT_TRUE(good.Connect());
  const std::vector<std::vector<std::uint8_t>> hellos = {
      {0, 0, 0, 0},              // empty identity
      {0xff, 0xff, 0xff, 0xff},  // longer than any identity
      {65, 0, 0, 0},             // one past kMaxHelloFrame
  };
  std::vector<int> raw;
  for (const auto& h : hellos) {
    const int fd = path.RawConnect();
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, h.data(), h.size(), MSG_NOSIGNAL), static_cast<ssize_t>(h.size()));
    raw.push_back(fd);
  }
  ASSERT_TRUE(listener->Send("c0.9", Frame{7}));  // takes every connection waiting
  for (int fd : raw) {
    // Closed by the listener: the read sees the end (within the ceiling).
    pollfd p{fd, POLLIN, 0};
    for (int i = 0; i < 200 && ::poll(&p, 1, 50) == 0; ++i) {
      listener->Wait(-1, 0);
      listener->Service();
    }
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, MSG_DONTWAIT), 0) << "still open";
    ::close(fd);
  }
  std::vector<Frame> got;
  EXPECT_TRUE(ReadFrames(good, &got, 1));
  EXPECT_EQ(got, std::vector<Frame>{Frame{7}});
  EXPECT_EQ(listener->connections(), 1u);
}

// A peer that connects and never says who it is is let go.
TEST(FrameStream, AConnectionWithoutAHelloIsClosedInTime) {
  SocketPath path;
  std::unique_ptr<StreamListener> listener;
  ASSERT_TRUE(StreamListener::Listen(path.address(), &listener, /*hello_timeout_ms=*/100).ok());
  const int silent = path.RawConnect();
  ASSERT_GE(silent, 0);
  ASSERT_EQ(::send(silent, "\x05\0\0", 3, MSG_NOSIGNAL), 3);  // a hello begun, never ended
  StreamConnection good(path.address(), "c0.4");
  ASSERT_TRUE(good.Connect());
  pollfd p{silent, POLLIN, 0};
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (::poll(&p, 1, 0) == 0 && Clock::now() < deadline) {
    listener->Wait(-1, 20);
    listener->Service();
  }
  char c;
  EXPECT_EQ(::recv(silent, &c, 1, MSG_DONTWAIT), 0) << "still open";
  ::close(silent);
  EXPECT_EQ(listener->connections(), 1u);  // the one that said hello stays
  ASSERT_TRUE(listener->Send("c0.4", Frame{8}));
  std::vector<Frame> got;
  EXPECT_TRUE(ReadFrames(good, &got, 1));
  EXPECT_EQ(got, std::vector<Frame>{Frame{8}});
}

// Raw bytes to the receiver: a length past the limit ends the connection,
// after the whole frames before it.
TEST(FrameStream, ALengthPastTheLimitEndsTheConnection) {
  SocketPath path;
  const int server = path.RawListen();
  ASSERT_GE(server, 0);
  StreamConnection r(path.address(), "c0.7");
  ASSERT_TRUE(r.Connect());
  const int peer = ::accept(server, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  const std::uint32_t too_long = kMaxFrame + 1;
  std::vector<std::uint8_t> bytes = {2, 0, 0, 0, 'o', 'k'};
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(too_long >> (8 * i)));
  bytes.resize(bytes.size() + 100, 'x');
  ASSERT_EQ(::send(peer, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  std::vector<Frame> got;
  EXPECT_FALSE(ReadFrames(r, &got, 2));
  EXPECT_EQ(got, (std::vector<Frame>{Frame{'o', 'k'}}));
  EXPECT_FALSE(r.connected());
  ::close(peer);
  ::close(server);
}

}  // namespace frame_stream_test
}  // namespace sightline::ipc
