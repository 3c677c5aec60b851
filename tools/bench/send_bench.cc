// An engine step's writes, one small chunk to each of N loopback TCP
// connections, through BatchSender: one io_uring submission for all of them
// against one sendmsg each (issue 46). A process of its own reads and drops
// everything on the far ends; a step comes every millisecond. "CPU" is the
// sending thread's, which on loopback includes the receiving side's TCP
// work in the kernel.
//
//   build/tools/bench/send_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//
// Arguments: connections, ring (1: io_uring, 0: sendmsg).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/batch_send.h"

namespace sightline::api::http_internal {
namespace {

// N connected loopback TCP pairs; the far ends read (and dropped) by a
// child process until the pairs go.
class Connections {
 public:
  explicit Connections(int n) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a);
    getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    listen(listener, n);
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < n; ++i) {
      const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
      const int s = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      const int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.fd = c;
      epoll_ctl(epoll_, EPOLL_CTL_ADD, c, &e);
      senders.push_back(s);
      readers_.push_back(c);
    }
    close(listener);
    // The far ends are read by a process of their own, as a client is.
    reader_ = fork();
    if (reader_ == 0) {
      for (int f : senders) close(f);  // so that the parent's close ends each
      char buf[1 << 16];
      epoll_event ev[64];
      for (int open = n; open > 0;) {
        const int k = epoll_wait(epoll_, ev, 64, -1);
        for (int i = 0; i < k; ++i) {
          ssize_t r;
          while ((r = read(ev[i].data.fd, buf, sizeof buf)) > 0) {
          }
          if (r == 0) {
            close(ev[i].data.fd);
            --open;
          }
        }
      }
      _exit(0);
    }
    for (int f : readers_) close(f);
    close(epoll_);
  }
  ~Connections() {
    for (int f : senders) close(f);
    waitpid(reader_, nullptr, 0);
  }
  std::vector<int> senders;

 private:
  int epoll_ = -1;
  std::vector<int> readers_;
  pid_t reader_ = -1;
};

void BM_StepOfWrites(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Connections c(n);
  BatchSender sender(state.range(1) ? BatchSender::Use::kRing : BatchSender::Use::kSendmsg);
  if (state.range(1) && !sender.ring()) return state.SkipWithError(sender.why_not().c_str());
  // A streamed token's chunk, framed: about what one completions chunk is.
  const std::vector<std::string> chunk = {std::string(140, 'x')};
  long short_writes = 0;
  for (auto _ : state) {
    for (int fd : c.senders) sender.Add(fd, chunk);
    for (long r : sender.Flush()) short_writes += r != static_cast<long>(chunk[0].size());
    // The next step comes a millisecond later (a decode step's order):
    // meanwhile the reader catches up and sleeps, as a client does.
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state.ResumeTiming();
  }
  state.counters["writes"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n), benchmark::Counter::kIsRate);
  state.counters["short_writes"] = static_cast<double>(short_writes);
}
BENCHMARK(BM_StepOfWrites)
    ->ArgNames({"connections", "ring"})
    ->Args({64, 0})
    ->Args({64, 1})
    ->Args({256, 0})
    ->Args({256, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sightline::api::http_internal

BENCHMARK_MAIN();
