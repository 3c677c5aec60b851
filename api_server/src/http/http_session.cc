// One connection of HttpServer: read a request header, refuse it early or
// read its body, dispatch, answer (whole or streamed), repeat while
// keep-alive (the Session of http_connection.h; its Responder is in
// http_responder.cc). Every member of a Session is touched only on its
// connection's executor ("strand"; see http_session.h).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <vector>

#include "http/http_protocol.h"
#include "http/http_session.h"
#include "http/tcp_progress.h"

namespace sightline::api::http_internal {

namespace {

const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
const std::string kLastChunk = "0\r\n\r\n";
// After a response that ends the connection, unread client bytes are
// discarded this long before closing, so the close is a FIN rather than a
// RST that could destroy the response before the client reads it
// (RFC 9112 §9.6).
constexpr auto kLinger = std::chrono::seconds(2);
// What a client sends while its request is answered (a pipelined request,
// a stray CRLF) is read and kept for the next request, so that the hangup
// watch can go on; past this much the server stops reading, and a hangup
// shows only when the answer's write fails.
constexpr std::size_t kMaxHeldBytes = 64u << 10;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string_view View(beast::string_view s) {
  return {s.data(), s.size()};
}

bool IsHttpError(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::need_more).category();
}

// A stream's header as Beast writes it (async_write_header's bytes).
std::string HeaderWire(http::response<http::empty_body>& header) {
  http::response_serializer<http::empty_body> sr(header);
  sr.split(true);
  std::string out;
  beast::error_code ec;
  while (!ec && !sr.is_header_done()) {
    sr.next(ec, [&](beast::error_code&, const auto& buffers) {
      for (const asio::const_buffer b : beast::buffers_range_ref(buffers))
        out.append(static_cast<const char*>(b.data()), b.size());
      sr.consume(beast::buffer_bytes(buffers));
    });
  }
  // Beast fails no header it built; should it, the connection ends unanswered
  // (Session::Guard), reported as 500.
  if (ec) throw beast::system_error(ec);
  return out;
}

}  // namespace

void Session::Read() {
  // Everything of the previous request goes: a late call for it is dropped
  // by seq, and nothing it queued may leak into this one.
  ++seq_;
  handler_ = nullptr;
  head_ = writing_ = ending_ = answered_ = complete_ = false;
  pending_.clear();
  in_flight_.clear();
  streaming_ = keep_after_stream_ = last_write_ = false;
  header_wire_.clear();
  whole_.reset();
  on_disconnect_ = nullptr;
  // RFC 9112 §2.2: empty lines before a request line are ignored (some
  // clients send CRLF after a body). Those already read are dropped here.
  {
    const auto* p = static_cast<const char*>(buffer_.data().data());
    std::size_t n = 0;
    while (n < buffer_.size() && (p[n] == '\r' || p[n] == '\n')) ++n;
    buffer_.consume(n);
  }
  parser_ = std::make_unique<http::request_parser<http::string_body>>();
  parser_->body_limit(core_->options.max_body_bytes);
  // One deadline for the header, idle keep-alive time included: a client
  // trickling bytes (slowloris) cannot hold the connection longer.
  stream_.expires_after(Seconds(core_->options.read_timeout_s));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
}

// Errors of reading a request: true when the request was answered or the
// connection closed.
bool Session::Refused(const beast::error_code& ec) {
  if (!ec) return false;
  if (ec == http::error::body_limit) {
    BeginAnswer();
    Finish(
        ErrorResponse(
            413, "request body exceeds " + std::to_string(core_->options.max_body_bytes) + " bytes",
            "BadRequestError"),
        false);
  } else if (IsHttpError(ec) && ec != http::error::end_of_stream) {
    BeginAnswer();
    Finish(ErrorResponse(400, "malformed HTTP request: " + ec.message(), "BadRequestError"), false);
  } else {
    Close();  // the client went away, or let the read deadline pass
  }
  return true;
}

void Session::OnHeader(beast::error_code ec) {
  BeginExchange();        // a header refused after its request line is a request too
  if (ec) version_ = 11;  // what the refusal speaks, when the start line is unknown
  if (Refused(ec)) return;
  const auto& m = parser_->get();
  version_ = m.version();
  keep_alive_ = m.keep_alive();
  request_ = HttpRequest{};
  request_.method = std::string(m.method_string());
  head_ = m.method() == http::verb::head;
  SplitTarget(View(m.target()), &request_.path, &request_.query);
  std::vector<std::string_view> codings;
  for (const auto& field : m) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (field.name() == http::field::transfer_encoding) codings.push_back(View(field.value()));
    // Repeated lines are one comma-separated list (RFC 9110 §5.3): W3C
    // tracestate may come in several, and two traceparents then fail to parse.
    auto [it, fresh] = request_.headers.emplace(std::move(name), std::string(field.value()));
    if (!fresh) it->second.append(", ").append(View(field.value()));
  }
  HttpResponse error;
  bool framing = false;  // the body's length is unknown: the connection must end
  const std::size_t hosts = m.count(http::field::host);
  const TransferCoding coding = ClassifyTransferEncoding(codings);
  if (hosts > 1 || (version_ >= 11 && hosts == 0)) {  // RFC 9112 §3.2
    error =
        ErrorResponse(400, "an HTTP/1.1 request needs exactly one Host header", "BadRequestError");
  } else if (coding != TransferCoding::kNone && version_ < 11) {  // RFC 9112 §6.1
    error = ErrorResponse(400, "Transfer-Encoding in an HTTP/1.0 request", "BadRequestError");
    framing = true;
  } else if (coding == TransferCoding::kUnsupported) {
    error = ErrorResponse(501, "unsupported Transfer-Encoding (only chunked is implemented)",
                          "NotImplementedError");
    framing = true;
  } else if (!core_->Authorized(request_)) {
    error = ErrorResponse(401, "missing or invalid API key", "AuthenticationError");
  } else if (core_->draining && request_.path != "/metrics") {
    error = ErrorResponse(503, "the server is shutting down", "ServiceUnavailableError");
    keep_alive_ = false;
  } else {
    handler_ = core_->Find(request_, &error);
  }
  if (!handler_) {
    // Refused on its header: the body is not read (nor 100 Continue sent),
    // so the connection goes on only if there is no body.
    BeginAnswer();
    return Finish(std::move(error), keep_alive_ && !framing && parser_->is_done());
  }
  if (on_control_ && !core_->options.control_paths.contains(request_.path))
    return MoveToStreamLane();
  ReadBody();
}

void Session::MoveToStreamLane() {
  // Nothing is pending on the socket (its header read has completed), so it
  // can change io_contexts: released here, adopted by a socket there.
  beast::error_code ec;
  const tcp::endpoint local = stream_.socket().local_endpoint(ec);
  const int fd = ec ? -1 : stream_.socket().release(ec);
  if (ec) {  // still this session's socket: answered here
    std::fprintf(stderr, "sightline: HTTP: moving a connection to the I/O threads: %s\n",
                 ec.message().c_str());
    BeginAnswer();
    return Finish(ErrorResponse(500, "internal server error", "InternalServerError"), false);
  }
  write_timer_.cancel();  // an earlier answer's, if any: this session ends here
  tcp::socket socket(ConnectionExecutor(*core_->stream_io, core_->stream_threads));
  socket.assign(local.protocol(), fd, ec);
  if (ec) {  // no socket holds it: closed unanswered
    ::close(fd);
    std::fprintf(stderr, "sightline: HTTP: moving a connection to the I/O threads: %s\n",
                 ec.message().c_str());
    return EndExchange(500);
  }
  HandOver(std::move(socket));
}

void Session::HandOver(tcp::socket socket) {
  auto next = std::make_shared<Session>(core_, std::move(socket), admitted_);
  // Under way from here (Drain waits for it), though it waits in the I/O
  // threads' queue before its body is read.
  next->BeginAnswer();
  next->buffer_ = std::move(buffer_);
  next->parser_ = std::move(parser_);
  next->request_ = std::move(request_);
  next->handler_ = handler_;
  next->seq_ = seq_;
  next->version_ = version_;
  next->keep_alive_ = keep_alive_;
  next->head_ = head_;
  next->exchange_ = std::move(exchange_);
  exchange_.open = false;
  moved_ = true;
  asio::post(next->stream_.get_executor(), [next] { next->ReadBody(); });
}

void Session::ReadBody() {
  if (parser_->is_done()) return Dispatch();
  const auto& m = parser_->get();
  auto read_body = [self = shared_from_this()] {
    self->stream_.expires_after(Seconds(self->core_->options.read_timeout_s));
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code e, std::size_t) { self->OnBody(e); });
  };
  const auto expect = m.find(http::field::expect);
  if (version_ >= 11 && expect != m.end() && IEquals(View(expect->value()), "100-continue")) {
    BeginTimedWrite();
    asio::async_write(stream_.socket(), asio::buffer(kContinue),
                      [self = shared_from_this(), read_body](beast::error_code e, std::size_t) {
                        self->writing_ = false;
                        if (e) return self->Hangup();
                        read_body();
                      });
    return;
  }
  read_body();
}

void Session::OnBody(beast::error_code ec) {
  if (Refused(ec)) return;
  request_.body = std::move(parser_->get().body());
  Dispatch();
}

void Session::Dispatch() {
  BeginAnswer();
  stream_.expires_never();  // the handler may take as long as generation does
  HttpRequest req = std::move(request_);
  WatchForHangup();
  try {
    (*handler_)(req, MakeResponder(core_->links, shared_from_this()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sightline: HTTP: %s %s: internal error: %s\n", req.method.c_str(),
                 req.path.c_str(), e.what());
    Finish(ErrorResponse(500, "internal server error", "InternalServerError"), false);
  } catch (...) {
    std::fprintf(stderr, "sightline: HTTP: %s %s: internal error\n", req.method.c_str(),
                 req.path.c_str());
    Finish(ErrorResponse(500, "internal server error", "InternalServerError"), false);
  }
}

// While a request is being answered, a readable socket with nothing to read
// means the client hung up. Bytes are taken into buffer_ (the next request
// is read from there) and the watch re-armed, so a close after them is seen.
void Session::WatchForHangup() {
  if (buffer_.size() >= kMaxHeldBytes) return;
  watching_ = true;
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      asio::bind_executor(stream_.get_executor(),
                          [self = shared_from_this(), seq = seq_](beast::error_code ec) {
                            if (self->seq_ != seq) return;  // an earlier request's
                            self->watching_ = false;
                            if (ec || self->complete_ || self->gone_ || self->closing_) return;
                            self->TakeWaitingBytes();
                          }));
}

void Session::TakeWaitingBytes() {
  const auto space = buffer_.prepare(kMaxHeldBytes - buffer_.size());
  const ssize_t n =
      ::recv(stream_.socket().native_handle(), space.data(), space.size(), MSG_DONTWAIT);
  // 0: an orderly close; an error other than "nothing yet": a reset.
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    return Hangup();
  if (n > 0) buffer_.commit(static_cast<std::size_t>(n));
  WatchForHangup();
}

void Session::Hangup() {
  if (gone_) return;
  gone_ = true;
  AnswerDone();
  // Chunks queued behind the write under way are freed now, not when the
  // handler lets go of its responder (those it is writing stay until it ends).
  pending_.clear();
  Close();  // before the callback: a throwing one must not leave the socket open
  if (on_disconnect_) std::exchange(on_disconnect_, nullptr)();
}

void Session::Finish(HttpResponse r, bool keep_alive) {
  if (gone_ || closing_ || answered_) return;
  answered_ = true;
  keep_alive = keep_alive && !core_->draining;
  res_ = {};
  res_.version(version_);
  res_.result(static_cast<http::status>(r.status));
  res_.set(http::field::server, "sightline");
  res_.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res_.set(k, v);
  // RFC 9110 §15.5.2: every 401 names the scheme.
  if (r.status == 401 && res_.find(http::field::www_authenticate) == res_.end())
    res_.set(http::field::www_authenticate, "Bearer");
  exchange_.status = r.status;
  exchange_.response_bytes = head_ ? 0 : r.body.size();
  EndExchange(0);  // before the answer can reach the client
  if (head_) {
    res_.content_length(r.body.size());  // what GET would send, without it
  } else {
    res_.body() = std::move(r.body);
    res_.prepare_payload();
  }
  res_.keep_alive(keep_alive);
  whole_ = std::make_unique<http::response_serializer<http::string_body>>(res_);
  writing_ = true;
  WriteWhole(keep_alive);
}

// A whole response is written in pieces through the raw socket under the
// streams' progress timer: write_timeout_s bounds a write that makes no
// progress (the client stopped reading), not the whole body, which a slow
// but reading client may take long over.
void Session::WriteWhole(bool keep_alive) {
  BeginTimedWrite();
  auto done = [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
    if (!ec && !self->whole_->is_done()) return self->WriteWhole(keep_alive);
    self->writing_ = false;
    if (ec) return self->Hangup();
    self->Completed();
    if (!keep_alive) return self->Linger();
    self->Read();
  };
  http::async_write_some(stream_.socket(), *whole_, std::move(done));
}

void Session::StreamHeader(int status, std::string type,
                           std::map<std::string, std::string> headers) {
  if (gone_ || closing_ || answered_) return;
  http::response<http::empty_body> header(static_cast<http::status>(status), version_);
  header.set(http::field::server, "sightline");
  header.set(http::field::content_type, type);
  header.set(http::field::cache_control, "no-cache");
  for (const auto& [k, v] : headers) header.set(k, v);
  // HTTP/1.1: chunked, and the last chunk ends the body, so the connection
  // serves the client's next request after it, as after any other answer
  // (HTTP/1.1's default). Clients that reuse connections (vLLM's benchmark,
  // the OpenAI SDKs' pools) then pay no connect, accept and close per
  // request. HTTP/1.0 has no chunked coding: no length, and the close ends
  // the body; so does a HEAD stream's.
  keep_after_stream_ = version_ >= 11 && keep_alive_ && !head_ && !core_->draining;
  if (version_ >= 11) header.chunked(true);
  header.keep_alive(keep_after_stream_);
  if (!keep_after_stream_) header.set(http::field::connection, "close");
  // Written with the stream's first chunks, in the same write (on a lane,
  // in the run's one submission): a system call and a segment fewer per
  // request than writing it alone, and the same bytes.
  header_wire_ = HeaderWire(header);
  answered_ = streaming_ = true;
  exchange_.status = status;
  WriteSoon();
}

namespace {

// A view of gather buffers as Asio's ConstBufferSequence: copied by the
// write operation without copying (or allocating) the buffers themselves.
struct BufferRange {
  const asio::const_buffer* first;
  const asio::const_buffer* last;
  const asio::const_buffer* begin() const { return first; }
  const asio::const_buffer* end() const { return last; }
};

// At most this many chunks in one write: Asio's reactive sockets hand the
// kernel at most 64 buffers per sendmsg.
constexpr std::size_t kMaxGather = 64;

}  // namespace

void Session::Pump() {
  if (Gather()) WriteGathered(0);
}

bool Session::Gather() {
  if (writing_ || gone_ || closing_ || !streaming_) return false;
  const bool header = !header_wire_.empty();  // not written yet: it goes first
  if (!header && pending_.empty() && !ending_) return false;
  if (!header && pending_.empty() && (version_ < 11 || head_)) {  // the close ends the body
    ending_ = false;
    Completed();
    Linger();
    return false;
  }
  in_flight_.clear();
  if (header) in_flight_.push_back(std::exchange(header_wire_, std::string()));
  pending_.PopFront(std::min(pending_.size(), kMaxGather),
                    [this](std::string&& chunk) { in_flight_.push_back(std::move(chunk)); });
  // The last chunk goes in the write that takes everything still queued.
  last_write_ = ending_ && version_ >= 11 && !head_ && pending_.empty();
  gather_.clear();
  for (const std::string& chunk : in_flight_) gather_.push_back(asio::buffer(chunk));
  if (last_write_) {
    ending_ = false;
    gather_.push_back(asio::buffer(kLastChunk));
  }
  BeginTimedWrite();  // one clock read per write
  return true;
}

std::optional<std::size_t> Session::AddWrite(BatchSender& out) {
  write_wanted_ = false;
  std::optional<std::size_t> index;
  Guard([&] {
    if (Gather()) index = out.Add(stream_.socket().native_handle(), gather_);
  });
  return index;
}

void Session::Sent(long result) {
  Guard([&] {
    if (result == -EAGAIN || result == -EWOULDBLOCK) return WriteGathered(0);
    if (result < 0)
      return Written(beast::error_code(static_cast<int>(-result), beast::system_category()));
    WriteGathered(static_cast<std::size_t>(result));
  });
}

void Session::WriteGathered(std::size_t skip) {
  std::size_t done = 0;
  while (done < gather_.size() && skip >= gather_[done].size()) skip -= gather_[done++].size();
  gather_.erase(gather_.begin(), gather_.begin() + static_cast<std::ptrdiff_t>(done));
  if (gather_.empty()) return Written({});
  gather_.front() += skip;
  // The raw socket: no Beast timer or rate policy per write.
  asio::async_write(
      stream_.socket(), BufferRange{gather_.data(), gather_.data() + gather_.size()},
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->Written(ec); });
}

void Session::Written(beast::error_code ec) {
  writing_ = false;
  // The kernel is done with the chunks: their buffers serve later ones.
  if (LaneQueue* lane = Lane())
    for (std::string& chunk : in_flight_) lane->Recycle(std::move(chunk));
  in_flight_.clear();
  if (ec) return Hangup();
  if (last_write_) {
    Completed();
    // A drain that began during the stream closes the connection anyway
    // (a server may close an idle persistent connection at any time).
    if (keep_after_stream_ && !core_->draining) return Read();
    return Linger();
  }
  Pump();
}

// Every write to the client (100 Continue, a whole response piece by piece,
// a stream's header and chunks) goes through the raw socket under one
// progress timer: a write during which the connection does not move for
// write_timeout_s means the client stopped reading, and it is dropped, so it
// cannot pin the connection or the chunks queued behind the write. The
// connection moves when a write completes or the client acknowledges more
// bytes (tcp_progress.h says why a completed write alone is not enough: how
// long one write waits grows with the kernel's send buffer, not with the
// client's pace). Acknowledgements are sampled every quarter deadline, so
// the drop comes 1 to 1.25 deadlines after the connection last moved
// (without TCP_INFO, a deadline after the last completed write). A client
// that stops reading is still acknowledged into its own receive buffer
// until that fills; one that reads a byte per deadline keeps its connection,
// which max_connections bounds.
void Session::BeginTimedWrite() {
  writing_ = true;
  last_progress_ = Clock::now();
  if (!write_timer_armed_) StartWriteTimer();
}

Clock::duration Session::WriteTick() const {
  return Seconds(core_->options.write_timeout_s) / 4;
}

void Session::StartWriteTimer() {
  acked_ = TcpBytesAcked(stream_.socket().native_handle());
  ArmWriteTimer(WriteTick());
}

void Session::ArmWriteTimer(Clock::duration d) {
  write_timer_armed_ = true;
  write_timer_.expires_after(d);
  write_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    self->write_timer_armed_ = false;
    if (ec || self->gone_ || self->closing_ || !self->writing_) return;
    const auto now = Clock::now();
    const auto acked = TcpBytesAcked(self->stream_.socket().native_handle());
    if (acked && acked != self->acked_) self->last_progress_ = now;
    self->acked_ = acked;
    const auto limit = Seconds(self->core_->options.write_timeout_s);
    const auto stalled = now - self->last_progress_;
    if (stalled >= limit) return self->Hangup();
    self->ArmWriteTimer(std::min(limit - stalled, self->WriteTick()));
  });
}

void Session::Linger() {
  if (gone_ || closing_) return;
  closing_ = true;
  beast::error_code ignored;
  write_timer_.cancel();
  stream_.socket().cancel(ignored);  // the hangup watch
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::min<Clock::duration>(kLinger, Seconds(core_->options.read_timeout_s)));
  Discard();
}

void Session::Discard() {
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (ec) return self->Close();
                            self->buffer_.clear();
                            self->Discard();
                          });
}

void ServeConnection(HttpCore* core, tcp::socket socket) {
  // Streamed tokens are small writes: without TCP_NODELAY, Nagle holds each
  // one until the previous is acknowledged (40 ms with a delayed ACK), which
  // a client would see as inter-token latency.
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  ++core->connections;
  std::make_shared<Session>(core, std::move(socket), true, core->stream_io != nullptr)->Start();
}

void RefuseConnection(HttpCore* core, tcp::socket socket) {
  if (core->refusing.load() >= kMaxRefusing) return;  // closed as it goes
  ++core->refusing;
  std::make_shared<Session>(core, std::move(socket), false, core->stream_io != nullptr)->Refuse();
}

}  // namespace sightline::api::http_internal
