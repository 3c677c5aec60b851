// BatchSender (batch_send.h): an engine step's sends in one io_uring
// submission, or one sendmsg each.
#include "http/batch_send.h"

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

namespace sightline::api::http_internal {

namespace {

// Submission queue entries: sends beyond this go in further submissions.
// The completion queue is twice as deep, and is emptied after each.
constexpr unsigned kDepth = 256;
constexpr int kFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

std::string Errno(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// A send's result until its completion is read.
constexpr long kPending = std::numeric_limits<long>::min();
// The user data of a cancellation's own completion (a send's is its index).
constexpr std::uint64_t kCancel = std::uint64_t{1} << 63;

// Reads the completions there are into `results` (a send's by its index).
void Reap(io_uring* ring, std::vector<long>* results) {
  unsigned head = 0, seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(ring, head, cqe) {
    const std::uint64_t data = io_uring_cqe_get_data64(cqe);
    if (!(data & kCancel)) (*results)[data] = cqe->res;
    ++seen;
  }
  io_uring_cq_advance(ring, seen);
}

// What BatchSender relies on: a MSG_DONTWAIT send that finds its socket's
// buffer full completes with -EAGAIN inside the call that submits it, as
// sendmsg would, instead of waiting in the kernel for room (Linux has done
// so since 5.x; this checks the kernel at hand). "" or why not.
std::string CheckNoWait(io_uring* ring) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Errno("socketpair", errno);
  const int small = 4096;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  static char buf[4096];
  while (::send(sv[0], buf, sizeof buf, kFlags) > 0) {
  }
  std::string why;
  if (errno != EAGAIN) why = Errno("filling a socket", errno);
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  io_uring_sqe* sqe = why.empty() ? io_uring_get_sqe(ring) : nullptr;
  if (sqe) {
    io_uring_prep_sendmsg(sqe, sv[0], &msg, kFlags);
    const int submitted = io_uring_submit(ring);
    io_uring_cqe* cqe = nullptr;
    if (submitted != 1) {
      why = Errno("io_uring_submit", -submitted);
    } else if (io_uring_peek_cqe(ring, &cqe) != 0) {
      // It waits for room: closing the peer fails it, and it completes.
      ::close(sv[1]);
      sv[1] = -1;
      io_uring_wait_cqe(ring, &cqe);
      io_uring_cqe_seen(ring, cqe);
      why = "a non-blocking send waits in the kernel";
    } else {
      if (cqe->res != -EAGAIN) why = Errno("a send to a full socket", -cqe->res);
      io_uring_cqe_seen(ring, cqe);
    }
  }
  ::close(sv[0]);
  if (sv[1] >= 0) ::close(sv[1]);
  return why;
}

}  // namespace

struct BatchSender::Ring {
  io_uring ring{};
  bool open = false;
  ~Ring() {
    if (open) io_uring_queue_exit(&ring);
  }
  // "" or why this process cannot use io_uring as BatchSender does.
  std::string Open() {
    const int err = io_uring_queue_init(kDepth, &ring, 0);
    if (err < 0) return Errno("io_uring_queue_init", -err);
    open = true;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    const bool sendmsg = probe && io_uring_opcode_supported(probe, IORING_OP_SENDMSG);
    if (probe) io_uring_free_probe(probe);
    if (!sendmsg) return "this kernel's io_uring has no sendmsg";
    return CheckNoWait(&ring);
  }
};

BatchSender::BatchSender(Use use) {
  if (use != Use::kRing) return;
  auto ring = std::make_unique<Ring>();
  why_not_ = ring->Open();
  if (why_not_.empty()) {
    ring_ = std::move(ring);
    return;
  }
  static std::once_flag said;
  std::call_once(said, [this] {
    std::fprintf(stderr, "sightline: HTTP: io_uring unavailable (%s): one sendmsg per write\n",
                 why_not_.c_str());
  });
}

BatchSender::~BatchSender() = default;

void BatchSender::Clear() {
  sends_.clear();
  iov_.clear();
}

const std::vector<long>& BatchSender::Flush() {
  struct Cleared {  // however Flush ends, the next batch starts empty
    BatchSender* s;
    ~Cleared() { s->Clear(); }
  } cleared{this};
  const std::size_t n = sends_.size();
  msgs_.assign(n, msghdr{});
  for (std::size_t i = 0; i < n; ++i) {
    msgs_[i].msg_iov = iov_.data() + sends_[i].first;
    msgs_[i].msg_iovlen = sends_[i].count;
  }
  results_.assign(n, kPending);
  if (ring_)
    SendOnRing();
  else
    SendEach(0, n);
  // Every send has its result by now; were one missing, its connection
  // would end rather than assume anything about its bytes.
  std::replace(results_.begin(), results_.end(), kPending, static_cast<long>(-EIO));
  return results_;
}

void BatchSender::SendEach(std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) {
    ssize_t r;
    do {
      r = ::sendmsg(sends_[i].fd, &msgs_[i], kFlags);
    } while (r < 0 && errno == EINTR);
    results_[i] = r < 0 ? -errno : r;
  }
}

void BatchSender::GiveUpRing(const char* why, int err) noexcept {
  ring_.reset();  // first: what is below may fail, once sends were made
  try {
    why_not_ = err ? Errno(why, err) : why;
  } catch (...) {
  }
  std::fprintf(stderr, "sightline: HTTP: io_uring: %s%s%s: one sendmsg per write from now on\n",
               why, err ? ": " : "", err ? std::strerror(err) : "");
}

void BatchSender::SendOnRing() {
  io_uring* ring = &ring_->ring;
  const std::size_t n = sends_.size();
  for (std::size_t next = 0; next < n;) {
    std::size_t queued = 0;
    for (io_uring_sqe* sqe; next + queued < n && (sqe = io_uring_get_sqe(ring)); ++queued) {
      const std::size_t i = next + queued;
      io_uring_prep_sendmsg(sqe, sends_[i].fd, &msgs_[i], kFlags);
      io_uring_sqe_set_data64(sqe, i);
    }
    // Without IORING_SETUP_SUBMIT_ALL (Linux 5.18) the kernel stops at an
    // entry it cannot even start (a closed descriptor), which completes
    // with its error; the entries behind it go in the next call.
    std::size_t submitted = 0;
    while (submitted < queued) {
      const int r = io_uring_submit(ring);
      if (r == -EINTR) continue;
      if (r <= 0) {
        // The entries the kernel has not taken would go with the next
        // submission (Collect's cancels): they become no-ops, sent below by
        // sendmsg instead, once those it took are collected.
        DisarmUntaken(ring);
        Collect(next, next + submitted);
        GiveUpRing(r < 0 ? "io_uring_submit" : "io_uring_submit took nothing", -r);
        return SendEach(next + submitted, n);
      }
      submitted += static_cast<std::size_t>(r);
    }
    if (!Collect(next, next + queued)) {
      GiveUpRing("sends that waited in the kernel were cancelled", 0);
      return SendEach(next + queued, n);
    }
    next += queued;
  }
}

bool BatchSender::Collect(std::size_t from, std::size_t to) {
  io_uring* ring = &ring_->ring;
  const auto first = results_.begin() + static_cast<std::ptrdiff_t>(from);
  const auto last = results_.begin() + static_cast<std::ptrdiff_t>(to);
  auto missing = [&] { return std::count(first, last, kPending); };
  Reap(ring, &results_);
  if (missing() == 0) return true;  // each completed inside the submitting call (CheckNoWait)
  // Not expected after CheckNoWait. A send still in the kernel points at its
  // caller's buffers, so it must end before Flush returns: given a second,
  // then cancelled (it has sent nothing: a send completes at its first bytes).
  __kernel_timespec second{1, 0};
  for (io_uring_cqe* cqe = nullptr; missing() > 0;) {
    const int r = io_uring_wait_cqe_timeout(ring, &cqe, &second);
    if (r != 0 && r != -EINTR) break;
    Reap(ring, &results_);
  }
  bool cancelled = false;
  for (std::size_t i = from; i < to; ++i) {
    if (results_[i] != kPending) continue;
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (!sqe) {
      io_uring_submit(ring);
      sqe = io_uring_get_sqe(ring);
    }
    if (!sqe) continue;  // not expected: the queue holds as many as a round
    io_uring_prep_cancel64(sqe, i, 0);
    io_uring_sqe_set_data64(sqe, kCancel | i);
    cancelled = true;
  }
  io_uring_submit(ring);
  for (io_uring_cqe* cqe = nullptr; missing() > 0;)
    if (io_uring_wait_cqe(ring, &cqe) == 0) Reap(ring, &results_);
  std::replace(first, last, static_cast<long>(-ECANCELED), static_cast<long>(-EAGAIN));
  return !cancelled;
}

void BatchSender::DisarmUntaken(io_uring* ring) {
  const unsigned tail = *ring->sq.ktail;
  for (unsigned i = io_uring_smp_load_acquire(ring->sq.khead); i != tail; ++i) {
    io_uring_sqe* sqe = &ring->sq.sqes[ring->sq.array[i & ring->sq.ring_mask]];
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, kCancel);
  }
}

}  // namespace sightline::api::http_internal
