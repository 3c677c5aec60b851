// One connection of HttpServer (Session) as its two parts share it: the
// request/answer cycle (http_session.cc) and the Responder a handler answers
// through (http_responder.cc). Internal to api_server. Every member of a
// Session is touched only on its connection's executor (ConnectionExecutor
// in http_core.h: a strand, or the io_context one thread runs), called its
// strand below.
#pragma once

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/chunk_queue.h"
#include "http/http_core.h"
#include "sightline/clock.h"

namespace sightline::api::http_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `on_control`: the socket's executor is the control thread's (a request
  // for another path moves the connection to HttpCore::stream_io).
  Session(HttpCore* core, tcp::socket s, bool admitted, bool on_control = false)
      : core_(core),
        admitted_(admitted),
        on_control_(on_control),
        stream_(std::move(s)),
        write_timer_(stream_.get_executor()) {}
  ~Session() {
    if (moved_) return;  // a successor serves the connection, and accounts for it
    EndExchange(500);    // a handler that let its responder go unanswered, or the server stopped
    AnswerDone();
    if (admitted_)
      --core_->connections;
    else
      --core_->refusing;
  }

  void Start() { Read(); }
  void Refuse() {
    Finish(ErrorResponse(503,
                         "too many connections (this server accepts " +
                             std::to_string(core_->max_connections) + ")",
                         "ServiceUnavailableError"),
           false);
  }

  // What a Responder does, posted to the strand; `seq` names the request it
  // answers, and calls for any other (an earlier one) are dropped, so a late
  // or repeated call can never answer a later request on the connection.
  // On an io_context one thread runs, through its LaneQueue.
  template <typename F>
  void Post(std::uint64_t seq, F f) {
    if (LaneQueue* lane = Lane())
      return lane->Post(shared_from_this(), seq, std::function<void(Session&)>(std::move(f)));
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), seq, f = std::move(f)]() mutable { self->Run(seq, f); });
  }
  // Queue(wire, payload) posted: a stream chunk, once per token, so without
  // a std::function. On a lane, an empty *spare may get a recycled buffer.
  void PostChunk(std::uint64_t seq, std::string wire, std::size_t payload, std::string* spare) {
    if (LaneQueue* lane = Lane())
      return lane->Post(shared_from_this(), seq, std::move(wire), payload, spare);
    Post(seq, [wire = std::move(wire), payload](Session& s) mutable {
      s.Queue(std::move(wire), payload);
    });
  }
  // What Post's handler does, on the strand: `f` unless the connection has
  // moved on from request `seq`; a throw costs the connection only.
  template <typename F>
  void Run(std::uint64_t seq, F& f) {
    if (seq_ != seq) return;
    Guard([&] { f(*this); });
  }
  // Runs `f`, on the strand; what it throws ends the connection (500 if
  // nothing was sent yet), never another.
  template <typename F>
  void Guard(F f) {
    Contain("answering a request", f, [this] {
      EndExchange(500);
      Hangup();
    });
  }
  // The queue of the io_context this connection is on, when one thread runs
  // it; null: its strand.
  LaneQueue* Lane() const {
    return on_control_ ? core_->control_lane.get() : core_->stream_lane.get();
  }
  void Finish(HttpResponse r, bool keep_alive);
  void StreamHeader(int status, std::string type, std::map<std::string, std::string> headers);
  // `wire`: a chunk in wire form, carrying `payload` body bytes.
  void Queue(std::string wire, std::size_t payload) {
    if (gone_ || closing_ || head_) return;
    exchange_.response_bytes += payload;
    pending_.push_back(std::move(wire));
    WriteSoon();
  }
  void EndStream(std::string last_wire, std::size_t payload) {
    if (gone_ || closing_) return;
    if (streaming_) {
      if (!head_) exchange_.response_bytes += payload;
      EndExchange(0);  // before the last bytes can reach the client
    }
    // Queued, not written: it goes out in one write with the last chunk.
    if (!last_wire.empty() && !head_) pending_.push_back(std::move(last_wire));
    ending_ = true;
    if (Lane())
      WriteSoon();
    else
      Pump();
  }
  // On a lane (LaneQueue::Writes): adds the write there is to make to `out`
  // and returns its index there (none: nothing to write, or it failed and
  // the connection ended); then Sent() with what it wrote (or -errno).
  std::optional<std::size_t> AddWrite(BatchSender& out);
  void Sent(long result);
  void SetOnDisconnect(std::function<void()> cb) {
    if (complete_) return;  // answered in full: the client no longer matters
    if (gone_) return cb();
    on_disconnect_ = std::move(cb);
  }
  std::uint64_t seq() const { return seq_; }
  unsigned version() const { return version_; }
  bool keep_alive() const { return keep_alive_; }

 private:
  void Read();
  void OnHeader(beast::error_code ec);
  void ReadBody();  // then Dispatch()
  // Hands the connection, with the request whose header was read, to a new
  // Session on the I/O threads, which reads the body and dispatches.
  void MoveToStreamLane();
  void HandOver(tcp::socket socket);  // the new Session on `socket` takes everything
  void OnBody(beast::error_code ec);
  void Dispatch();
  bool Refused(const beast::error_code& ec);
  void WatchForHangup();
  void TakeWaitingBytes();
  void WriteWhole(bool keep_alive);
  // Writes what is queued: Gather(), then WriteGathered(0).
  void Pump();
  // The next write (everything queued, up to kMaxGather chunks, and the
  // last chunk once the stream has ended) into gather_; false when there is
  // nothing to write (a stream that ends without a last chunk is complete).
  bool Gather();
  // Writes gather_ but its first `skip` bytes (already sent), then Written().
  void WriteGathered(std::size_t skip);
  void Written(beast::error_code ec);
  // Writes soon what was queued: on a lane, with its other writes at the
  // end of its run; on a strand, PumpLater().
  void WriteSoon() {
    if (LaneQueue* lane = Lane()) {
      if (!write_wanted_) lane->WantWrite(shared_from_this());
      write_wanted_ = true;
      return;
    }
    PumpLater();
  }
  // Pump once the handlers already queued on the connection's strand have
  // run: an engine step's chunks for one connection (n choices, each posted
  // on its own by the engine client's thread) then usually go out in one
  // write, not the first alone and the rest in a second (a chunk posted after
  // the pump goes in the next write).
  void PumpLater() {
    if (writing_ || pump_posted_) return;  // a write's completion pumps anyway
    pump_posted_ = true;
    asio::post(stream_.get_executor(), [self = shared_from_this(), seq = seq_] {
      self->pump_posted_ = false;
      if (self->seq_ == seq) self->Pump();  // never into a later exchange
    });
  }
  void BeginTimedWrite();
  Clock::duration WriteTick() const;
  void StartWriteTimer();
  void ArmWriteTimer(Clock::duration d);
  void Hangup();
  void Linger();
  void Discard();
  // The HttpExchange of the request being answered (http_exchange.cc).
  // BeginExchange: once the request line is read; EndExchange reports it
  // once, with the status sent or, if none was, `unanswered`.
  void BeginExchange();
  void EndExchange(int unanswered);
  void Close() {
    EndExchange(499);  // the client went away (or let a deadline pass) unanswered
    write_timer_.cancel();
    stream_.close();
  }
  void BeginAnswer() {
    if (!counted_) ++core_->answering;
    counted_ = true;
  }
  void AnswerDone() {
    if (counted_) --core_->answering;
    counted_ = false;
  }
  void Completed() {  // the answer is fully written
    AnswerDone();
    complete_ = true;
    on_disconnect_ = nullptr;
    if (watching_) {  // nothing else is pending on the socket now
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      watching_ = false;
    }
  }

  HttpCore* core_;
  const bool admitted_;
  const bool on_control_;
  bool moved_ = false;  // MoveToStreamLane gave everything to a successor
  beast::tcp_stream stream_;
  asio::steady_timer write_timer_;
  beast::flat_buffer buffer_;
  std::unique_ptr<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;  // the one being read (header first)
  const AsyncHandler* handler_ = nullptr;
  http::response<http::string_body> res_;
  std::unique_ptr<http::response_serializer<http::string_body>> whole_;  // res_ being written
  // Streaming: the header, then chunks (in wire form). Every chunk queued
  // when a write can start goes in that one write (a gathered sendmsg), so
  // the chunks of one engine step for this connection cost one system call;
  // the byte stream is the same as one write per chunk. A write takes its
  // chunks out of pending_ into in_flight_, where they stay in place while
  // more are queued; once written, their buffers go back to the lane
  // (LaneQueue::Recycle) for later chunks. Both keep their capacity.
  bool streaming_ = false;   // StreamHeader() ran: the header is written or in header_wire_
  std::string header_wire_;  // the header, until a write takes it (ahead of any chunk)
  ChunkQueue pending_;
  std::vector<std::string> in_flight_;
  std::vector<asio::const_buffer> gather_;  // the write under way's buffers
  bool last_write_ = false;                 // it carries the last chunk
  bool keep_after_stream_ = false;          // the header kept the connection alive
  bool write_wanted_ = false;               // in the lane's writers (WriteSoon)
  std::uint64_t seq_ = 0;                   // the request being answered
  unsigned version_ = 11;
  bool keep_alive_ = false, head_ = false;
  bool writing_ = false, ending_ = false, answered_ = false, complete_ = false;
  bool gone_ = false;     // the client went away (or stopped reading)
  bool closing_ = false;  // the last response was written; lingering
  bool counted_ = false;  // this request is in core_->answering
  bool write_timer_armed_ = false;
  bool pump_posted_ = false;  // PumpLater's handler is queued
  bool watching_ = false;     // the hangup watch is pending
  // The write progress timer's state: when a write last completed or the
  // client last acknowledged bytes, and the acknowledged count last seen.
  Clock::time_point last_progress_;
  std::optional<std::uint64_t> acked_;
  std::function<void()> on_disconnect_;
  struct Exchange {
    bool open = false;
    std::string handler, method;
    int status = 0;  // 0: nothing sent yet
    std::size_t request_bytes = 0, response_bytes = 0;
    Clock::time_point start;
  } exchange_;
};

// The Responder for the request `session` is answering now (its seq()); its
// reference to the session is held in `links` (see ResponderLinks).
std::shared_ptr<Responder> MakeResponder(std::shared_ptr<ResponderLinks> links,
                                         std::shared_ptr<Session> session);

}  // namespace sightline::api::http_internal
