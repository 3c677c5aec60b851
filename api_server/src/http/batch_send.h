// Non-blocking sends to many sockets at once (issue 46). An engine step
// writes one chunk to each of its streams' connections; one sendmsg each
// costs a system call's entry and exit per token (a step's writes to 64
// loopback connections take 0.77 times the CPU in one submission:
// tools/bench/send_bench, PERFORMANCE.md). On
// Linux's io_uring the sends of one step go to the kernel in one call;
// where io_uring is missing or refused (an old kernel, a container whose
// seccomp profile forbids it), each is one sendmsg, with the same results.
//
// Every send is non-blocking (MSG_DONTWAIT): it writes what the socket's
// buffer takes now, all, part or nothing (-EAGAIN), and never waits. A
// closed peer is -EPIPE or -ECONNRESET, never SIGPIPE. Internal to
// api_server. Not thread-safe: one BatchSender per thread that uses it.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

struct io_uring;  // liburing's

namespace sightline::api::http_internal {

class BatchSender {
 public:
  enum class Use {
    kRing,     // io_uring, when this kernel and process may use it
    kSendmsg,  // one sendmsg per send
  };
  explicit BatchSender(Use use = Use::kRing);
  ~BatchSender();
  BatchSender(const BatchSender&) = delete;
  BatchSender& operator=(const BatchSender&) = delete;

  // Whether sends go through io_uring; when they do not although kRing was
  // asked for, why (`why_not`, once per process on stderr too).
  bool ring() const { return ring_ != nullptr; }
  const std::string& why_not() const { return why_not_; }

  // Adds a send of `buffers` (a range of buffers with data() and size(), at
  // most IOV_MAX; they must stay valid until Flush returns) to `fd`, and
  // returns its index among Flush's results. Added whole or, if it throws
  // (out of memory), not at all.
  template <typename Buffers>
  std::size_t Add(int fd, const Buffers& buffers) {
    const std::size_t first = iov_.size();
    try {
      for (const auto& b : buffers)
        iov_.push_back({const_cast<void*>(static_cast<const void*>(b.data())), b.size()});
      sends_.push_back({fd, first, iov_.size() - first});
    } catch (...) {
      iov_.resize(first);
      throw;
    }
    return sends_.size() - 1;
  }
  // Makes every send added since the last Flush (or Clear), in order:
  // results[i] is the number of bytes the i-th wrote, or -errno (-EAGAIN:
  // none). Valid until the next Add. If it throws (out of memory), nothing
  // was sent; either way the sends are gone.
  const std::vector<long>& Flush();
  // Drops the sends added since the last Flush, unsent.
  void Clear();

 private:
  struct Ring;  // liburing's, kept out of this header
  struct Send {
    int fd;
    std::size_t first, count;  // its buffers in iov_
  };
  void SendEach(std::size_t from, std::size_t to);  // [from, to) by sendmsg
  void SendOnRing();
  // Reads the results of the submitted sends [from, to); false when some had
  // to be cancelled (reported -EAGAIN) after waiting in the kernel.
  bool Collect(std::size_t from, std::size_t to);
  // Sendmsg from now on, because of `why` (and errno `err`, if not 0).
  void GiveUpRing(const char* why, int err) noexcept;
  // Makes the entries io_uring_submit left in the queue no-ops.
  static void DisarmUntaken(::io_uring* ring);

  std::unique_ptr<Ring> ring_;
  std::string why_not_;
  std::vector<Send> sends_;
  std::vector<iovec> iov_;
  std::vector<msghdr> msgs_;
  std::vector<long> results_;
};

}  // namespace sightline::api::http_internal
