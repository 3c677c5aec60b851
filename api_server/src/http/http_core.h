// The connection side of HttpServer: what a connection needs of its server
// (HttpCore) and the two ways an accepted socket is served. Internal to
// api_server; see http_server.h for the contract.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/batch_send.h"
#include "http/http_server.h"
#include "sightline/wake_batch.h"

namespace sightline::api::http_internal {

class Session;

// Runs `f`, which stands for one connection (or one accept): what it throws
// is logged ("sightline: HTTP: <doing>: ...") and then `failed` runs, so that
// it costs nothing else.
template <typename F, typename Failed>
void Contain(const char* doing, F&& f, Failed&& failed) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sightline: HTTP: %s: %s\n", doing, e.what());
    failed();
  } catch (...) {
    std::fprintf(stderr, "sightline: HTTP: %s: unknown exception\n", doing);
    failed();
  }
}

// What is posted to the connections of an io_context that one thread runs,
// queued here in order and run there by one handler: an engine step's
// chunks for many connections cross threads in one post (and, at most, one
// wake-up), not one each (issue 46). One queue per io_context, so nothing
// passes anything: the order is the order of the calls, as asio::post's.
//
// The writes of the streams it ran chunks for go out together at the end of
// each run, in one io_uring submission where the kernel allows (one
// sendmsg each otherwise; BatchSender): what the sockets take then is sent,
// and the rest of a write waits for room as any other (asio::async_write).
//
// The engine client's output thread hands over the outputs of each read
// from the engine (an engine step's, or a few steps' when it is behind)
// inside a WakeBatch: the lane is then woken once, at the end of the read.
//
// Written chunks' buffers come back (Recycle) and go out again with later
// Posts, so that a streamed token costs no heap allocation once a stream's
// first chunks have been written (issue 46). Each stream's responder holds
// at most one spare; the lane keeps at most kMaxSpares handed back since
// its last run and kMaxSpares to hand out, of at most kMaxSpareBytes each
// (16 MiB at worst; they are kept, not returned to the heap, once the load
// that made them is over). Past kMaxSpares streams on a lane, the others
// allocate their chunks as before.
class LaneQueue : public Wakeable {
 public:
  // The spares' limits: enough for an engine step's chunks of many
  // streams; a buffer grown past a large chunk is freed, not kept.
  static constexpr std::size_t kMaxSpares = 1024;
  static constexpr std::size_t kMaxSpareBytes = 8192;

  // `use`: how the writes at the end of a run are made.
  explicit LaneQueue(boost::asio::io_context* io, BatchSender::Use use = BatchSender::Use::kSendmsg)
      : io_(io), sender_(use) {
    spares_.reserve(kMaxSpares);
    recycled_.reserve(kMaxSpares);
  }
  // A stream chunk in wire form for Session::Queue; or another call. When
  // `spare` is given and empty, a recycled buffer (empty, with capacity)
  // is put there if the lane has one.
  void Post(std::shared_ptr<Session> session, std::uint64_t seq, std::string wire,
            std::size_t payload, std::string* spare = nullptr);
  void Post(std::shared_ptr<Session> session, std::uint64_t seq,
            std::function<void(Session&)> call);
  // On the io_context's thread: `session` has bytes to write, sent at the
  // end of this run (or of the next, when called outside one).
  void WantWrite(std::shared_ptr<Session> session);
  // On the io_context's thread: a chunk the kernel is done with, its buffer
  // for a later Post's spare (or freed, past the limits).
  void Recycle(std::string buffer);
  // Posts a run for what is queued, unless one is posted or the lane is
  // closed (Clear()).
  void Wake() override;
  // Drops what is queued and closes the lane. Once the io_context's threads
  // have stopped, and before it goes (a queued session's socket belongs to
  // it).
  void Clear();

 private:
  struct Item {
    std::shared_ptr<Session> session;
    std::uint64_t seq = 0;
    std::string wire;  // a chunk, when `call` is empty
    std::size_t payload = 0;
    std::function<void(Session&)> call;
  };
  void Add(Item item, std::string* spare = nullptr);
  void PostDrain();  // under mu_
  void Drain();      // on the io_context's thread
  void Writes();     // Drain's last step: the writes WantWrite asked for

  boost::asio::io_context* const io_;
  std::mutex mu_;
  std::vector<Item> items_;            // guarded by mu_
  bool posted_ = false;                // a Drain is queued (guarded by mu_)
  bool closed_ = false;                // Clear() was called (guarded by mu_)
  std::vector<std::string> spares_;    // guarded by mu_; recycled_ moves here at each Drain
  std::vector<std::string> recycled_;  // the io_context's thread's: Recycle()d since the last Drain
  std::vector<Item> running_;          // Drain's, its capacity kept
  // The io_context's thread's alone: the sessions with bytes to write, and
  // those whose write is in the batch (both keep their capacity).
  bool draining_ = false;
  std::vector<std::shared_ptr<Session>> writers_, flushing_;
  std::vector<std::pair<std::size_t, std::shared_ptr<Session>>> batch_;  // by send index
  BatchSender sender_;
};

// The Responders' references to their sessions. A handler may keep a
// responder for as long as it likes (a generation in the engine client's
// handler map outlives the HTTP server at shutdown), but a session's socket
// and timers belong to the io_context and must go before it: so the strong
// references live here, one per live responder, and Stop() drops them all
// and closes the gate; after that a responder's calls do nothing. Shared,
// since responders may outlive the server.
struct ResponderLinks {
  std::mutex mu;
  bool open = true;
  std::list<std::shared_ptr<Session>> sessions;
};

// Shared by the server and its connections. It outlives every connection:
// HttpServer stops and joins its io_context, severs the responders
// (SeverResponders) and destroys the io_context (its pending handlers, hence
// the sessions) before the core goes.
struct HttpCore {
  HttpServerOptions options;
  std::size_t max_connections = 0;  // resolved at Start()
  // (method, path) -> handler; read-only once serving. Method "" is any.
  std::map<std::pair<std::string, std::string>, AsyncHandler> routes;
  std::atomic<bool> draining{false};        // StopAccepting() was called
  std::atomic<int> answering{0};            // requests read whose answer is not fully written
  std::atomic<std::size_t> connections{0};  // admitted connections alive
  std::atomic<std::size_t> refusing{0};     // over-cap connections being answered 503
  std::shared_ptr<ResponderLinks> links = std::make_shared<ResponderLinks>();
  // The I/O threads' io_context, where a connection on the control thread
  // moves when it asks for a path outside options.control_paths. HttpServer
  // always sets it; null (a test serving sessions on one io_context): every
  // connection stays where it was accepted.
  boost::asio::io_context* stream_io = nullptr;
  int stream_threads = 1;  // the threads running stream_io (max(1, options.threads))
  // The lanes' queues: the control thread's, and the I/O threads' when one
  // thread runs them (else null: each connection posts to its strand).
  std::shared_ptr<LaneQueue> control_lane, stream_lane;

  bool Authorized(const HttpRequest& req) const;
  // The handler for a request (HEAD falls back to GET), or nullptr with the
  // 404, or the 405 carrying `Allow`, in *error.
  const AsyncHandler* Find(const HttpRequest& req, HttpResponse* error) const;
  // A path's handler label: the route's path when some route (any method)
  // has it, else "none" (http_exchange.cc).
  std::string_view RouteTemplate(const std::string& path) const;
};

// Connections beyond max_connections are refused with 503 while at most this
// many refusals are in flight (each holds a descriptor for a moment); beyond
// that they are closed at once. Part of the descriptor headroom the default
// cap leaves.
constexpr std::size_t kMaxRefusing = 64;

// A connection's executor, on which its handlers never overlap: on an
// io_context that one thread runs (the control thread; the I/O threads by
// default), the io_context's own, for a strand costs every streamed chunk
// a second lock, queue and allocation on the way (about 1 µs a token,
// issue 46); with several threads, a strand of its own.
boost::asio::any_io_executor ConnectionExecutor(boost::asio::io_context& io, int threads);

// Serves an accepted connection: reads requests, dispatches them, answers.
// The socket's executor must be a ConnectionExecutor, on the control thread
// when `core->stream_io` is set.
void ServeConnection(HttpCore* core, boost::asio::ip::tcp::socket socket);
// Answers an accepted connection over the cap with 503 (an OpenAI error
// body, Connection: close) without reading a request, then closes it.
void RefuseConnection(HttpCore* core, boost::asio::ip::tcp::socket socket);

// Drops every responder's reference to its session and makes every later
// responder call a no-op. Call once the I/O threads are joined and before
// the io_context is destroyed.
void SeverResponders(HttpCore* core);

// Accepts connections until closed and hands each to `admit`, on the
// acceptor's strand (async_accept's completion and close() never overlap
// with several I/O threads); each socket's executor is a
// ConnectionExecutor of `io` for `threads` threads. Nothing that happens to one connection stops
// it: an accept error (out of descriptors) is retried after a back-off, an
// exception from `admit` is logged and costs that connection only.
class AcceptLoop {
 public:
  using Admit = std::function<void(boost::asio::ip::tcp::socket)>;
  AcceptLoop(boost::asio::io_context& io, int threads, Admit admit);
  // Open (or assign) and listen before Start().
  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }
  void Start();  // posts the first accept
  void Close();  // posts the close (and the end of the back-off)

 private:
  void Accept();
  void Retry();  // Accept() after a back-off

  boost::asio::io_context& io_;
  const int threads_;
  Admit admit_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer backoff_;
};

// Runs `io` on the calling thread until it is stopped or out of work. An
// exception escaping a completion handler is logged and the loop resumed, so
// it costs at most that handler's connection, never the thread or process.
void RunLoop(boost::asio::io_context& io);

}  // namespace sightline::api::http_internal
