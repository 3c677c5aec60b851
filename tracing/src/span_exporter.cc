#include "sightline/tracing/span_exporter.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "otlp_encode.h"
#include "otlp_http.h"

namespace sightline::tracing {

namespace {

using Clock = std::chrono::steady_clock;

// The longest wait anything here takes (a delay, a timeout): a day. Longer
// values are clamped, so that no duration overflows the clock.
constexpr double kMaxSeconds = 86400;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// gzip with zlib (RFC 1952), as OTLP's Content-Encoding: gzip asks.
std::string Gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return {};
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

// Retried as the OTLP/HTTP specification lists: throttled or unavailable.
bool Retryable(const PostResult& r) {
  return r.status == 0 || r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504;
}

}  // namespace

const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kQueueFull:
      return "queue_full";
    case DropReason::kExportFailed:
      return "export_failed";
    case DropReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

class SpanExporter::Impl {
 public:
  Impl(ExporterOptions options, HttpUrl url, Counters counters)
      : options_(std::move(options)), url_(std::move(url)), counters_(std::move(counters)) {
    if (options_.gzip) headers_.emplace_back("Content-Encoding", "gzip");
    headers_.insert(headers_.end(), options_.headers.begin(), options_.headers.end());
    thread_ = std::thread([this] { Run(); });
  }

  ~Impl() { Shutdown(0); }

  void Export(Span span) {
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
      if (!stopping && queue_.size() < options_.max_queue) {
        queue_.push_back(std::move(span));
        if (queue_.size() >= options_.max_batch) wake_.notify_one();
        return;
      }
    }
    Dropped(stopping ? DropReason::kShutdown : DropReason::kQueueFull, 1);
  }

  void Shutdown(double seconds) {
    std::thread thread;  // taken under the lock: one caller joins it
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        stopping_ = true;
        deadline_ = Clock::now() + Seconds(std::clamp(seconds, 0.0, kMaxSeconds));
      }
      thread = std::move(thread_);
    }
    wake_.notify_one();
    if (thread.joinable()) thread.join();
  }

 private:
  void Dropped(DropReason reason, std::uint64_t n) {
    if (n > 0 && counters_.dropped) counters_.dropped(reason, n);
  }

  // Waits for a full batch, the schedule delay or a shutdown, then sends
  // what is queued, batch by batch (a partial batch only once the delay has
  // passed, or when shutting down).
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait_until(lock, Clock::now() + Seconds(options_.schedule_delay_seconds),
                       [&] { return stopping_ || queue_.size() >= options_.max_batch; });
      while (!queue_.empty()) {
        if (stopping_ && Clock::now() >= deadline_) {  // out of time: nothing more is sent
          Dropped(DropReason::kShutdown, queue_.size());
          queue_.clear();
          break;
        }
        const std::size_t n = std::min(queue_.size(), options_.max_batch);
        std::vector<Span> batch(std::make_move_iterator(queue_.begin()),
                                std::make_move_iterator(queue_.begin() + n));
        queue_.erase(queue_.begin(), queue_.begin() + n);
        lock.unlock();
        Send(batch);
        lock.lock();
        if (!stopping_ && queue_.size() < options_.max_batch) break;
      }
      if (stopping_) return;
    }
  }

  // One batch, with its retries; the lock is not held.
  void Send(const std::vector<Span>& batch) {
    std::string body = EncodeExportRequest(options_, batch);
    if (options_.gzip) body = Gzip(body);
    double backoff = options_.initial_backoff_seconds;
    std::mt19937 jitter(std::random_device{}());
    for (int attempt = 1;; ++attempt) {
      // One attempt's deadline: the export timeout, or a shutdown's, sooner.
      const auto timeout_at = Clock::now() + Seconds(options_.timeout_seconds);
      const PostResult r = HttpPost(url_, body, headers_, [this, timeout_at] {
        std::lock_guard<std::mutex> lock(mu_);
        return stopping_ ? std::min(timeout_at, deadline_) : timeout_at;
      });
      if (r.status >= 200 && r.status < 300) {
        // A partial success names the spans the collector rejected.
        const std::int64_t rejected =
            std::clamp<std::int64_t>(RejectedSpans(r.body), 0, batch.size());
        if (counters_.exported) counters_.exported(batch.size() - rejected);
        return Dropped(DropReason::kExportFailed, rejected);
      }
      Warn(r);
      if (PastShutdownDeadline()) return Dropped(DropReason::kShutdown, batch.size());
      if (!Retryable(r) || attempt >= options_.max_attempts)
        return Dropped(DropReason::kExportFailed, batch.size());
      // Exponential back-off with jitter (half to all of the wait), or the
      // collector's Retry-After; cut short by a shutdown's deadline.
      double wait = std::uniform_real_distribution<double>(backoff / 2, backoff)(jitter);
      if (r.retry_after >= 0) wait = std::min(r.retry_after, options_.max_backoff_seconds);
      backoff = std::min(backoff * 2, options_.max_backoff_seconds);
      std::unique_lock<std::mutex> lock(mu_);
      const auto until = Clock::now() + Seconds(wait);
      while (true) {  // a shutdown arriving meanwhile brings the end closer
        const auto end = stopping_ ? std::min(until, deadline_) : until;
        if (Clock::now() >= end) break;
        wake_.wait_until(lock, end);
      }
      if (stopping_ && Clock::now() >= deadline_) {
        lock.unlock();
        return Dropped(DropReason::kShutdown, batch.size());
      }
    }
  }

  bool PastShutdownDeadline() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_ && Clock::now() >= deadline_;
  }

  // One line per failure, at most one every 10 s: a collector that is down
  // must not flood the log.
  void Warn(const PostResult& r) {
    const auto now = Clock::now();
    if (now < next_warning_) return;
    next_warning_ = now + std::chrono::seconds(10);
    std::cerr << "WARNING OTLP export to http://" << url_.host << ":" << url_.port << url_.target
              << " failed: " << (r.status ? "HTTP " + std::to_string(r.status) : r.error) << "\n";
  }

  const ExporterOptions options_;
  const HttpUrl url_;
  const Counters counters_;
  std::vector<std::pair<std::string, std::string>> headers_;
  Clock::time_point next_warning_{};  // the exporter thread's

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Span> queue_;
  bool stopping_ = false;
  Clock::time_point deadline_{};
  std::thread thread_;  // last: started once the rest is built
};

Status SpanExporter::Check(const ExporterOptions& options) {
  HttpUrl url;
  if (Status s = HttpUrl::Parse(options.endpoint, &url); !s.ok()) return s;
  if (options.max_queue == 0 || options.max_batch == 0)
    return Status::InvalidArgument("the span queue and batch must hold at least one span");
  if (!(options.timeout_seconds > 0))
    return Status::InvalidArgument("the export timeout must be positive");
  return Status::Ok();
}

Status SpanExporter::Create(ExporterOptions options, Counters counters,
                            std::unique_ptr<SpanExporter>* out) {
  if (Status s = Check(options); !s.ok()) return s;
  HttpUrl url;
  (void)HttpUrl::Parse(options.endpoint, &url);
  options.max_batch = std::min(options.max_batch, options.max_queue);
  // A delay of 0 would spin the thread; none may overflow the clock.
  options.schedule_delay_seconds = std::clamp(options.schedule_delay_seconds, 1e-3, kMaxSeconds);
  options.timeout_seconds = std::min(options.timeout_seconds, kMaxSeconds);
  options.initial_backoff_seconds = std::clamp(options.initial_backoff_seconds, 1e-3, kMaxSeconds);
  options.max_backoff_seconds =
      std::clamp(options.max_backoff_seconds, options.initial_backoff_seconds, kMaxSeconds);
  out->reset(new SpanExporter(
      std::make_unique<Impl>(std::move(options), std::move(url), std::move(counters))));
  return Status::Ok();
}

SpanExporter::SpanExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpanExporter::~SpanExporter() = default;

void SpanExporter::Export(Span span) {
  impl_->Export(std::move(span));
}

void SpanExporter::Shutdown(double seconds) {
  impl_->Shutdown(seconds);
}

}  // namespace sightline::tracing
