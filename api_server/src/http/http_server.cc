#include "http/http_server.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <isa-l/igzip_lib.h>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "http/http_core.h"
#include "sightline/clock.h"
#include "sightline/utf8.h"

namespace sightline::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

HttpResponse ErrorResponse(int status, const std::string& message, const std::string& type,
                           const std::string& param) {
  const nlohmann::json param_json =
      param.empty() ? nlohmann::json(nullptr) : nlohmann::json(LossyUtf8(param));
  HttpResponse r;
  r.status = status;
  // The text is sanitised above; replace is the second line of defence, so a
  // body is always built.
  r.body = nlohmann::json{{"error",
                           {{"message", LossyUtf8(message)},
                            {"type", type},
                            {"param", param_json},
                            {"code", status}}}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string Gzip(const std::string& data, int level) {
  // ISA-L's igzip rather than zlib or libdeflate: whole-buffer compression
  // is all a response needs, and at its level 1 it takes the /metrics page
  // in a third of libdeflate's time (a fifth of zlib's, which made a new
  // stream per scrape; api_bench BM_MetricsGzip) for a few percent
  // more bytes. Each thread keeps its stream and its level's hash buffer
  // (allocated once, not per scrape).
  struct State {
    isal_zstream stream;
    std::vector<std::uint8_t> level_buf;
  };
  static constexpr std::uint32_t kLevelBuf[] = {ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT,
                                                ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT};
  // On the heap: a stream is 80 KB, too much for every thread's TLS.
  thread_local std::unique_ptr<State> states[4];
  if (data.size() > (1u << 30)) return {};  // igzip counts in 32 bits
  level = std::clamp(level, 0, 3);
  if (!states[level]) {
    states[level] = std::make_unique<State>();
    states[level]->level_buf.resize(kLevelBuf[level]);
  }
  State& st = *states[level];
  isal_zstream& z = st.stream;
  isal_deflate_init(&z);
  z.gzip_flag = IGZIP_GZIP;
  z.level = static_cast<std::uint32_t>(level);
  z.level_buf = st.level_buf.data();
  z.level_buf_size = static_cast<std::uint32_t>(st.level_buf.size());
  z.end_of_stream = 1;
  z.flush = NO_FLUSH;
  z.next_in = reinterpret_cast<std::uint8_t*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<std::uint32_t>(data.size());
  // Room for incompressible data: stored blocks' headers and gzip's own.
  std::string out(data.size() + data.size() / 64 + 256, '\0');
  std::size_t done = 0;
  for (;;) {
    z.next_out = reinterpret_cast<std::uint8_t*>(out.data() + done);
    z.avail_out = static_cast<std::uint32_t>(out.size() - done);
    if (isal_deflate(&z) != COMP_OK) return {};
    done = out.size() - z.avail_out;
    if (z.internal_state.state == ZSTATE_END) break;
    if (z.avail_out != 0) return {};  // stopped short with room left: never seen
    out.resize(out.size() * 2);       // not expected with the room above
  }
  out.resize(done);
  return out;
}

namespace http_internal {

asio::any_io_executor ConnectionExecutor(asio::io_context& io, int threads) {
  if (threads <= 1) return io.get_executor();
  return asio::make_strand(io);
}

AcceptLoop::AcceptLoop(asio::io_context& io, int threads, Admit admit)
    : io_(io),
      threads_(threads),
      admit_(std::move(admit)),
      strand_(asio::make_strand(io)),
      acceptor_(strand_),
      backoff_(strand_) {}

void AcceptLoop::Start() {
  asio::post(strand_, [this] { Accept(); });
}

void AcceptLoop::Close() {
  asio::post(strand_, [this] {
    beast::error_code ignored;
    backoff_.cancel();
    acceptor_.close(ignored);
  });
}

void AcceptLoop::Accept() {
  // Each connection's handlers and writes never overlap.
  acceptor_.async_accept(ConnectionExecutor(io_, threads_),
                         [this](beast::error_code ec, tcp::socket socket) {
                           if (!acceptor_.is_open()) return;
                           // Out of descriptors (or memory): retrying at once would spin on the
                           // same error; the connections waiting in the backlog are taken when
                           // some close.
                           if (ec) return Retry();
                           // Whatever admitting this connection does, the next accept is armed:
                           // an exception here used to end accepting for the life of the process.
                           http_internal::Contain(
                               "admitting a connection", [&] { admit_(std::move(socket)); }, [] {});
                           Accept();
                         });
}

void AcceptLoop::Retry() {
  backoff_.expires_after(std::chrono::milliseconds(50));
  backoff_.async_wait([this](beast::error_code e) {
    if (!e && acceptor_.is_open()) Accept();
  });
}

}  // namespace http_internal

// The acceptor and its threads; connections are served in http_session.cc.
// HttpCore is the base, so it is destroyed after the io_contexts (whose
// pending handlers own the sessions that point at it). Two lanes: the
// control thread (`control`: accepting, every connection's first request
// header, the control paths) and the I/O threads (`io`: everything else,
// streams above all); see HttpServerOptions::control_paths. A session's
// handlers are queued only on its own socket's io_context, so either may go
// first.
struct HttpServer::Impl : http_internal::HttpCore {
  asio::io_context io;
  asio::io_context control;
  // Both run until Stop(), whether or not they have work (the I/O threads
  // have none until a connection moves there).
  asio::executor_work_guard<asio::io_context::executor_type> io_work{io.get_executor()},
      control_work{control.get_executor()};
  http_internal::AcceptLoop accept{control, 1, [this](tcp::socket s) { Admit(std::move(s)); }};
  std::vector<std::thread> threads;  // the control thread first
  int bound_port = 0;

  void Admit(tcp::socket socket) {
    if (connections.load() >= max_connections)
      http_internal::RefuseConnection(this, std::move(socket));
    else
      http_internal::ServeConnection(this, std::move(socket));
  }
};

namespace {

// Asks the kernel for a short time slice on the calling thread (Linux 6.12's
// EEVDF: sched_attr.sched_runtime under SCHED_OTHER, 0.1 ms is its floor).
// A thread with a shorter slice gets an earlier deadline, so when it wakes
// it runs before the busy threads' slices end: the control thread, which
// sleeps until a scrape or probe arrives, answers it without waiting for one.
// Older kernels ignore the field; a refusal changes nothing, so it is not
// reported. Debian 12's glibc has no wrapper, hence the raw system call and
// struct.
void AskForAShortSlice() {
  // Only under the default policy: the call sets the policy too, and a
  // server run under another (chrt, systemd's CPUSchedulingPolicy=) keeps it.
  if (sched_getscheduler(0) != SCHED_OTHER) return;
  struct {
    std::uint32_t size, sched_policy;
    std::uint64_t sched_flags;
    std::int32_t sched_nice;
    std::uint32_t sched_priority;
    std::uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  attr.size = sizeof attr;  // SCHED_ATTR_SIZE_VER0, 48 bytes
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = getpriority(PRIO_PROCESS, 0);  // as it is
  attr.sched_runtime = 100'000;                    // ns
  syscall(SYS_sched_setattr, 0, &attr, 0u);
}

// The default connection cap: what the descriptor limit allows, less
// headroom for the 503s to over-cap connections, the engine's sockets and
// files. Bounded, since every idle connection holds a session.
std::size_t DefaultMaxConnections() {
  constexpr std::size_t kHeadroom = 128 + http_internal::kMaxRefusing;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
  const auto fds = static_cast<std::size_t>(limit.rlim_cur);
  if (fds <= 2 * kHeadroom) return std::max<std::size_t>(1, fds / 2);
  return std::min<std::size_t>(fds - kHeadroom, 65536);
}
}  // namespace

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Route(const std::string& method, const std::string& path, HttpHandler handler) {
  RouteAsync(method, path,
             [handler = std::move(handler)](const HttpRequest& r, std::shared_ptr<Responder> out) {
               out->Send(handler(r));
             });
}

void HttpServer::RouteAsync(const std::string& method, const std::string& path,
                            AsyncHandler handler) {
  impl_->routes[{method, path}] = std::move(handler);
}

int HttpServer::port() const {
  return impl_->bound_port;
}

Status HttpServer::Start() {
  Impl& m = *impl_;
  tcp::acceptor& acceptor = m.accept.acceptor();
  beast::error_code ec;
  if (m.options.inherited_fd >= 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (getsockname(m.options.inherited_fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
      return Status::IoError("listening fd " + std::to_string(m.options.inherited_fd) +
                             " is not a socket: " + std::strerror(errno));
    acceptor.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), m.options.inherited_fd,
                    ec);
    if (ec)
      return Status::IoError("cannot adopt listening fd " + std::to_string(m.options.inherited_fd) +
                             ": " + ec.message());
  } else {
    const auto address = asio::ip::make_address(m.options.host, ec);
    if (ec) return Status::InvalidArgument("invalid --host '" + m.options.host + "'");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(m.options.port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {  // N API servers on one port
      const int one = 1;
      if (setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return Status::IoError("SO_REUSEPORT: " + std::string(std::strerror(errno)));
    }
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Status::IoError("cannot listen on " + m.options.host + ":" +
                             std::to_string(m.options.port) + ": " + ec.message());
  }
  m.bound_port = acceptor.local_endpoint(ec).port();
  m.max_connections =
      m.options.max_connections > 0 ? m.options.max_connections : DefaultMaxConnections();
  m.stream_io = &m.io;
  m.stream_threads = std::max(1, m.options.threads);
  m.control_lane = std::make_shared<http_internal::LaneQueue>(&m.control);
  if (m.stream_threads == 1)
    m.stream_lane = std::make_shared<http_internal::LaneQueue>(
        &m.io, m.options.io_uring ? http_internal::BatchSender::Use::kRing
                                  : http_internal::BatchSender::Use::kSendmsg);
  m.accept.Start();
  // Named for top -H and perf (at most 15 characters).
  m.threads.emplace_back([&m] {
    pthread_setname_np(pthread_self(), "http-control");
    AskForAShortSlice();
    http_internal::RunLoop(m.control);
  });
  for (int i = 0; i < m.stream_threads; ++i)
    m.threads.emplace_back([&m] {
      pthread_setname_np(pthread_self(), "http-io");
      http_internal::RunLoop(m.io);
    });
  return Status::Ok();
}

void HttpServer::StopAccepting() {
  impl_->draining = true;
  impl_->accept.Close();
}

bool HttpServer::Drain(double timeout_s) {
  StopAccepting();
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (impl_->answering.load() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.threads.empty()) {
    m.accept.Close();
    m.control.stop();
    m.io.stop();
    for (auto& t : m.threads) t.join();
    m.threads.clear();
  }
  // No handler runs now: drop what responders held, so that every session
  // goes before the io_context its socket belongs to (here, or with the
  // io_context's pending handlers), whatever still holds a responder.
  http_internal::SeverResponders(&m);
  // What was posted and never ran goes now, while the io_contexts that its
  // sessions' sockets belong to are still there.
  if (m.control_lane) m.control_lane->Clear();
  if (m.stream_lane) m.stream_lane->Clear();
}

}  // namespace sightline::api
