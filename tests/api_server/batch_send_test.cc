// BatchSender (http/batch_send.h): the same results by io_uring and by
// sendmsg: whole sends, partial ones, a full socket, a closed peer, a closed
// descriptor in the middle of a batch, batches past the ring's depth.
#include "http/batch_send.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <vector>

namespace batch_send_test {

using sightline::api::http_internal::BatchSender;

// A connected pair of stream sockets, closed at the end.
struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void CloseReader() {
    close(fd[1]);
    fd[1] = -1;
  }
  // Everything there is to read now.
  std::string Drain() const {
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = recv(fd[1], buf, sizeof buf, MSG_DONTWAIT)) > 0;) out.append(buf, n);
    return out;
  }
};

// Whether this kernel lets the process set up an io_uring at all.
bool KernelHasIoUring() {
  char params[120] = {};
  const long fd = syscall(__NR_io_uring_setup, 4, params);
  if (fd < 0) return false;
  close(static_cast<int>(fd));
  return true;
}

class BatchSend : public ::testing::TestWithParam<BatchSender::Use> {};

TEST_P(BatchSend, UsesTheRingWhereTheKernelAllows) {
  BatchSender s(GetParam());
  if (GetParam() == BatchSender::Use::kSendmsg) {
    EXPECT_FALSE(s.ring());
    EXPECT_EQ(s.why_not(), "");
  } else {
    EXPECT_EQ(s.ring(), KernelHasIoUring()) << s.why_not();
    std::printf("io_uring: %s\n", s.ring() ? "yes" : s.why_not().c_str());
  }
}

// More sends than the ring is deep (256), each of several buffers; several
// batches through one sender.
TEST_P(BatchSend, EverySendArrivesWhole) {
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  const std::size_t pairs = std::min<std::size_t>(300, (files.rlim_cur - 64) / 2);
  std::vector<Pair> sockets(pairs);
  BatchSender s(GetParam());
  std::mt19937 rng(5);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<std::string>> bufs(pairs);
    std::vector<std::string> want(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
      for (std::size_t k = 0, n = 1 + rng() % 4; k < n; ++k) {
        bufs[i].push_back(std::string(1 + rng() % 300, static_cast<char>('a' + rng() % 26)));
        want[i] += bufs[i].back();
      }
      ASSERT_EQ(s.Add(sockets[i].fd[0], bufs[i]), i);
    }
    const std::vector<long>& sent = s.Flush();
    ASSERT_EQ(sent.size(), pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
      ASSERT_EQ(sent[i], static_cast<long>(want[i].size())) << round << " " << i;
      ASSERT_EQ(sockets[i].Drain(), want[i]) << round << " " << i;
    }
  }
  EXPECT_TRUE(s.Flush().empty());  // nothing added since
}

// A send larger than the socket takes writes a prefix; the next finds it
// full; a closed peer and a closed descriptor fail alone, and the sends
// behind them are made.
TEST_P(BatchSend, PartialFullAndFailedSends) {
  BatchSender s(GetParam());  // first: its ring's descriptor must not take closed_fd's number
  Pair big, after_big, closed_peer, after_closed;
  closed_peer.CloseReader();
  int spare[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, spare), 0);
  const int closed_fd = spare[0];
  close(spare[0]);
  close(spare[1]);
  const std::string large(8u << 20, 'x'), small = "hello";
  const std::vector<std::string> one_large = {large}, one_small = {small};
  s.Add(big.fd[0], one_large);
  s.Add(closed_peer.fd[0], one_small);
  s.Add(closed_fd, one_small);
  s.Add(after_closed.fd[0], one_small);
  s.Add(big.fd[0], one_small);  // full by now
  s.Add(after_big.fd[0], one_small);
  const std::vector<long> sent = s.Flush();
  ASSERT_EQ(sent.size(), 6u);
  EXPECT_GT(sent[0], 0);
  EXPECT_LT(sent[0], static_cast<long>(large.size()));
  EXPECT_EQ(sent[1], -EPIPE);  // and no SIGPIPE: this process would have died
  EXPECT_EQ(sent[2], -EBADF);
  EXPECT_EQ(sent[3], 5);
  EXPECT_EQ(sent[4], -EAGAIN);
  EXPECT_EQ(sent[5], 5);
  EXPECT_EQ(big.Drain(), large.substr(0, static_cast<std::size_t>(sent[0])));
  EXPECT_EQ(after_closed.Drain(), small);
  EXPECT_EQ(after_big.Drain(), small);
  // Room again: the rest goes.
  const std::vector<std::string> rest = {large.substr(static_cast<std::size_t>(sent[0]), 1000)};
  s.Add(big.fd[0], rest);
  EXPECT_EQ(s.Flush(), std::vector<long>{1000});
  EXPECT_EQ(big.Drain(), rest[0]);
}

// Sends dropped by Clear() are not made; the next batch starts afresh.
TEST_P(BatchSend, ClearedSendsAreNotMade) {
  Pair a, b;
  BatchSender s(GetParam());
  const std::vector<std::string> x = {"dropped"}, y = {"kept"};
  s.Add(a.fd[0], x);
  s.Clear();
  EXPECT_EQ(s.Add(b.fd[0], y), 0u);
  EXPECT_EQ(s.Flush(), std::vector<long>{4});
  EXPECT_EQ(a.Drain(), "");
  EXPECT_EQ(b.Drain(), "kept");
}

INSTANTIATE_TEST_SUITE_P(Uses, BatchSend,
                         ::testing::Values(BatchSender::Use::kRing, BatchSender::Use::kSendmsg),
                         [](const auto& p) {
                           return p.param == BatchSender::Use::kRing ? "Ring" : "Sendmsg";
                         });

}  // namespace batch_send_test
