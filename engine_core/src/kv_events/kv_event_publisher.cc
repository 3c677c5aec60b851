#include "kv_events/kv_event_publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sightline::engine {

namespace {

// How long the thread sleeps in poll with nothing to do. Publish and the
// destructor wake it at once (the eventfd); this only bounds a lost wakeup.
constexpr auto kKvPollTimeout = std::chrono::milliseconds(100);
// How long the destructor lets the thread publish what is still queued.
constexpr auto kKvDrainTimeout = std::chrono::seconds(1);

void KvBigEndian(std::uint64_t v, char out[8]) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xff);
}

std::uint64_t KvFromBigEndian(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// vLLM's rule: a wildcard host or a local transport is ours to bind; any
// other endpoint is somebody's to connect to.
bool KvBindsPub(const std::string& ep) {
  return ep.find('*') != std::string::npos || ep.find("::") != std::string::npos ||
         ep.starts_with("ipc://") || ep.starts_with("inproc://");
}

void KvWarn(const std::string& message) {
  std::fprintf(stderr, "WARNING engine: kv events: %s\n", message.c_str());
}

}  // namespace

Status KvEventPublisher::Start(const KvEventsConfig& config, int data_parallel_rank,
                               std::unique_ptr<KvEventPublisher>* out) {
  return Open(config, data_parallel_rank, /*paused=*/false, out);
}

Status KvEventPublisher::StartPaused(const KvEventsConfig& config, int data_parallel_rank,
                                     std::unique_ptr<KvEventPublisher>* out) {
  return Open(config, data_parallel_rank, /*paused=*/true, out);
}

KvEventPublisher::KvEventPublisher(const KvEventsConfig& config, int data_parallel_rank,
                                   bool paused)
    : config_(config), data_parallel_rank_(data_parallel_rank), paused_(paused) {}

Status KvEventPublisher::Open(const KvEventsConfig& config, int data_parallel_rank, bool paused,
                              std::unique_ptr<KvEventPublisher>* out) {
  out->reset();
  if (!config.publishes())
    return Status::InvalidArgument(
        "--kv-events-config: no publisher to start (events disabled or publisher \"null\")");
  KvEventsConfig c = config;
  Status s;
  c.endpoint = OffsetEndpointPort(config.endpoint, data_parallel_rank, &s);
  if (!s.ok()) return s;
  c.replay_endpoint = OffsetEndpointPort(config.replay_endpoint, data_parallel_rank, &s);
  if (!s.ok()) return s;

  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(c, data_parallel_rank, paused));
  p->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->wake_fd_ < 0)
    return Status::IoError(std::string("--kv-events-config: eventfd: ") + std::strerror(errno));
  const std::string* at = &c.endpoint;  // the endpoint an error is about
  try {
    p->pub_ = zmq::socket_t(p->context_, zmq::socket_type::pub);
    p->pub_.set(zmq::sockopt::linger, 0);
    p->pub_.set(zmq::sockopt::sndhwm, c.hwm);
    if (KvBindsPub(c.endpoint))
      p->pub_.bind(c.endpoint);
    else
      p->pub_.connect(c.endpoint);
    if (!c.replay_endpoint.empty()) {
      at = &c.replay_endpoint;
      p->replay_ = zmq::socket_t(p->context_, zmq::socket_type::router);
      p->replay_.set(zmq::sockopt::linger, 0);
      // A whole replay (up to buffer_steps + 1 messages) must fit in the
      // client's pipe: past the high-water mark a ROUTER silently drops,
      // which would leave the client a gap it cannot recover. Twice that
      // lets a client overlap two requests.
      const std::int64_t hwm = 2 * (std::int64_t{c.buffer_steps} + 1);
      p->replay_.set(zmq::sockopt::sndhwm,
                     static_cast<int>(std::min<std::int64_t>(hwm, INT32_MAX)));
      p->replay_.bind(c.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return Status::IoError("--kv-events-config: cannot open \"" + *at + "\": " + e.what());
  }
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  *out = std::move(p);
  return Status::Ok();
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
    paused_ = false;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  pub_.close();
  replay_.close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void KvEventPublisher::Publish(KvEventBatch batch) {
  batch.data_parallel_rank = data_parallel_rank_;
  bool wake = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (queue_.size() >= static_cast<std::size_t>(config_.max_queue_size)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Only the first batch into an empty queue needs to wake the thread: a
    // queue with batches in it already has a wakeup pending.
    wake = queue_.empty() && !paused_;
    queue_.push_back(std::move(batch));
  }
  if (wake) Wake();
}

void KvEventPublisher::Resume() {
  {
    std::lock_guard<std::mutex> g(mu_);
    paused_ = false;
  }
  Wake();
}

void KvEventPublisher::Wake() {
  const std::uint64_t one = 1;
  // Cannot fail but on counter overflow (2^64 - 2 wakeups unread).
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void KvEventPublisher::Run() {
  zmq::pollitem_t items[2] = {{nullptr, wake_fd_, ZMQ_POLLIN, 0},
                              {replay_.handle(), 0, ZMQ_POLLIN, 0}};
  const int nitems = replay_ ? 2 : 1;
  for (;;) {
    std::deque<KvEventBatch> work;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping = stopping_;
      if (!paused_) work.swap(queue_);
    }
    if (stopping) {
      // Nothing is published any more (the owner is in the destructor):
      // what is queued goes out unless that takes too long.
      const auto deadline = std::chrono::steady_clock::now() + kKvDrainTimeout;
      for (KvEventBatch& b : work) {
        if (std::chrono::steady_clock::now() > deadline) break;
        Send(std::move(b));
      }
      return;
    }
    for (KvEventBatch& b : work) Send(std::move(b));
    try {
      zmq::poll(items, nitems, kKvPollTimeout);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) KvWarn(std::string("poll: ") + e.what());
      continue;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      std::uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    if (nitems == 2 && (items[1].revents & ZMQ_POLLIN)) ServeReplay();
  }
}

void KvEventPublisher::Send(KvEventBatch batch) {
  std::string payload = EncodeKvEventBatch(batch);
  const std::uint64_t seq = next_seq_++;
  char seq_bytes[8];
  KvBigEndian(seq, seq_bytes);
  try {
    // A PUB socket does not block: past hwm it drops the message.
    pub_.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(seq_bytes, sizeof seq_bytes), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(payload), zmq::send_flags::none);
    published_.fetch_add(1, std::memory_order_relaxed);
  } catch (const zmq::error_t& e) {
    KvWarn("batch " + std::to_string(seq) + " not published: " + e.what());
  }
  // Buffered even when the send failed: a subscriber sees the gap in seq
  // and gets the batch by replay.
  buffer_.push_back({seq, std::move(payload)});
  while (buffer_.size() > static_cast<std::size_t>(config_.buffer_steps)) buffer_.pop_front();
}

// Serves every replay request waiting on the ROUTER.
void KvEventPublisher::ServeReplay() {
  static constexpr char kEndSeq[8] = {'\xff', '\xff', '\xff', '\xff',
                                      '\xff', '\xff', '\xff', '\xff'};
  for (;;) {
    std::vector<zmq::message_t> frames;
    try {
      zmq::message_t first;
      if (!replay_.recv(first, zmq::recv_flags::dontwait)) return;
      frames.push_back(std::move(first));
      while (frames.back().more()) {
        zmq::message_t part;
        if (!replay_.recv(part, zmq::recv_flags::none)) break;
        frames.push_back(std::move(part));
      }
    } catch (const zmq::error_t& e) {
      KvWarn(std::string("replay request: ") + e.what());
      return;
    }
    // [identity, "", start_seq]: what a DEALER sending ["", seq] or a REQ
    // sending [seq] looks like to a ROUTER. Anything else is ignored.
    if (frames.size() != 3 || frames[1].size() != 0 || frames[2].size() != 8) {
      KvWarn("replay request ignored: not [\"\", 8-byte start seq] (" +
             std::to_string(frames.size() - 1) + " frames after the identity)");
      continue;
    }
    const std::uint64_t start = KvFromBigEndian(frames[2].data<unsigned char>());
    const zmq::message_t& identity = frames[0];
    auto send = [&](zmq::const_buffer a, zmq::const_buffer b, zmq::const_buffer c) {
      replay_.send(zmq::buffer(identity.data(), identity.size()), zmq::send_flags::sndmore);
      replay_.send(zmq::const_buffer(), zmq::send_flags::sndmore);
      replay_.send(a, zmq::send_flags::sndmore);
      replay_.send(b, zmq::send_flags::sndmore);
      replay_.send(c, zmq::send_flags::none);
    };
    try {
      char seq_bytes[8];
      for (const Buffered& b : buffer_) {
        if (b.seq < start) continue;
        KvBigEndian(b.seq, seq_bytes);
        send(zmq::buffer(config_.topic), zmq::buffer(seq_bytes, sizeof seq_bytes),
             zmq::buffer(b.payload));
      }
      send(zmq::const_buffer(), zmq::buffer(kEndSeq, sizeof kEndSeq), zmq::const_buffer());
    } catch (const zmq::error_t& e) {
      // Not without ZMQ_ROUTER_MANDATORY: a ROUTER drops what it cannot route.
      KvWarn(std::string("replay reply: ") + e.what());
    }
  }
}

}  // namespace sightline::engine
