#include "sightline/loadgen/runner.h"

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "sightline/clock.h"

namespace sightline::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

namespace {

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

http::request<http::string_body> MakeRequest(const Target& t, http::verb verb,
                                             const std::string& path, std::string body) {
  http::request<http::string_body> req(verb, path, 11);
  req.set(http::field::host, t.host + ":" + std::to_string(t.port));
  req.set(http::field::user_agent, "sightline-bench");
  if (!t.api_key.empty()) req.set(http::field::authorization, "Bearer " + t.api_key);
  if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

// What one server-sent event says about the request.
void OnEvent(const std::string& data, Clock::time_point sent, Clock::time_point now,
             Clock::time_point* last, bool* done, RequestResult* r) {
  if (data == "[DONE]") {
    *done = true;
    return;
  }
  json e = json::parse(data, nullptr, false);
  if (e.is_discarded()) {
    r->failure = "unparsable event";
    return;
  }
  if (e.contains("error")) {
    r->failure = "error event: " + e["error"].value("message", std::string("?")).substr(0, 80);
    return;
  }
  if (e.contains("usage") && e["usage"].is_object()) {
    r->prompt_tokens = e["usage"].value("prompt_tokens", 0ull);
    r->output_tokens = e["usage"].value("completion_tokens", 0ull);
  }
  bool content = false, finish = false;
  if (e.contains("choices") && e["choices"].is_array())
    for (const auto& c : e["choices"]) {
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
        r->finish_reason = c["finish_reason"].get<std::string>();
        finish = true;
      }
      if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty())
        content = true;
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
          c["delta"]["content"].is_string() && !c["delta"]["content"].get<std::string>().empty())
        content = true;
    }
  const double t = std::chrono::duration<double>(now - sent).count();
  if (content || finish) r->last_token = t;
  if (!content) return;
  if (r->ttft < 0)
    r->ttft = t;
  else
    r->itl.push_back(std::chrono::duration<double>(now - *last).count());
  *last = now;
}

struct Shared {
  const RunOptions& options;
  const std::vector<BenchRequest>& workload;
  tcp::endpoint endpoint;
  Clock::time_point start;
  std::vector<RequestResult> results;
  std::vector<bool> sent;
  std::size_t next = 0, done = 0, in_flight = 0;
  bool stopping = false;
  std::set<beast::tcp_stream*> streams;  // in flight, for cancellation
  // Connections the server kept after an answer, for the next requests
  // (RunOptions::keep_alive).
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;
};

asio::awaitable<void> RunOne(Shared& s, std::size_t i) {
  RequestResult& r = s.results[i];
  s.sent[i] = true;
  ++s.in_flight;
  beast::error_code ec;
  const Clock::time_point sent = Clock::now();
  auto req = MakeRequest(s.options.target, http::verb::post, s.options.target.endpoint,
                         RequestBody(s.options, s.workload[i]));
  if (!s.options.keep_alive) req.keep_alive(false);  // Connection: close
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::buffer_body>> parser;
  // A kept connection that the server closed while it sat idle fails before
  // any answer comes (closed or reset); the request then goes once more on a
  // new connection, as HTTP clients' pools do, within the same deadline.
  for (bool reuse = s.options.keep_alive && !s.idle.empty();; reuse = false) {
    if (reuse) {
      stream = std::move(s.idle.back());
      s.idle.pop_back();
    } else {
      stream = std::make_unique<beast::tcp_stream>(co_await asio::this_coro::executor);
    }
    s.streams.insert(stream.get());
    ec = {};
    buffer.clear();
    parser.emplace();
    // No limit, spelled as the largest one: Boost 1.74's parser compares a
    // Content-Length against an empty optional as exceeding it, so `none`
    // turned every non-chunked response (an HTTP error's JSON) into "body
    // limit exceeded".
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream->expires_after(Seconds(s.options.request_timeout_s) - (Clock::now() - sent));
    if (!reuse)
      co_await stream->async_connect(s.endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
      co_await http::async_write(*stream, req, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
      co_await http::async_read_header(*stream, buffer, *parser,
                                       asio::redirect_error(asio::use_awaitable, ec));
    // Beast reports a close before any byte as end_of_stream; a write into a
    // closed connection fails with a reset or a broken pipe.
    const bool closed = ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
                        ec == asio::error::broken_pipe;
    if (!ec || !reuse || !closed || buffer.size() > 0 || s.stopping) break;
    s.streams.erase(stream.get());
  }
  std::string pending, error_body;
  bool saw_done = false;
  Clock::time_point last = sent;
  char chunk[16384];
  while (!ec && !parser->is_done()) {
    parser->get().body().data = chunk;
    parser->get().body().size = sizeof chunk;
    co_await http::async_read_some(*stream, buffer, *parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    const Clock::time_point now = Clock::now();
    const std::size_t n = sizeof chunk - parser->get().body().size;
    if (parser->get().result_int() != 200) {
      error_body.append(chunk, n);
      continue;
    }
    pending.append(chunk, n);
    for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      for (std::size_t pos = 0; pos < event.size();) {
        std::size_t eol = event.find('\n', pos);
        if (eol == std::string::npos) eol = event.size();
        if (event.compare(pos, 6, "data: ") == 0)
          OnEvent(event.substr(pos + 6, eol - pos - 6), sent, now, &last, &saw_done, &r);
        pos = eol + 1;
      }
    }
  }
  r.e2e = Since(sent);
  s.streams.erase(stream.get());
  // Kept for a later request when the server keeps it (the parser's view:
  // false for a body that the close ends) and the answer was read whole with
  // nothing after it; closed otherwise.
  if (s.options.keep_alive && !ec && !s.stopping && parser->is_done() && parser->keep_alive() &&
      buffer.size() == 0) {
    s.idle.push_back(std::move(stream));
  } else {
    beast::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
  }
  if (r.failure.empty()) {
    if (ec && s.stopping)
      r.failure = "cancelled: --max-duration reached";
    else if (ec == beast::error::timeout)
      r.failure = "timed out (--request-timeout)";
    else if (ec)
      r.failure = "connection: " + ec.message();
    else if (parser->get().result_int() != 200) {
      json e = json::parse(error_body, nullptr, false);
      std::string message = e.is_object() && e.contains("error") && e["error"].is_object()
                                ? e["error"].value("message", std::string())
                                : error_body;
      r.failure =
          "HTTP " + std::to_string(parser->get().result_int()) + ": " + message.substr(0, 80);
    } else if (!saw_done) {
      r.failure = "stream ended without [DONE]";
    } else if (r.output_tokens == 0 && r.ttft < 0) {
      r.failure = "no usage chunk";
    }
  }
  r.ok = r.failure.empty();
  --s.in_flight;
  ++s.done;
}

// Waits until `when` in short steps, so that a stop is noticed at once
// (io_context::run() returns only when no timer is left waiting).
asio::awaitable<void> WaitUntil(Shared& s, Clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!s.stopping && Clock::now() < when) {
    timer.expires_after(
        std::min<Clock::duration>(when - Clock::now(), std::chrono::milliseconds(50)));
    beast::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

// Takes the next request when its arrival time has come; with a concurrency
// limit, `max_concurrency` of these run at once.
asio::awaitable<void> Worker(Shared& s, const std::vector<double>& arrivals) {
  while (!s.stopping && s.next < s.workload.size()) {
    const std::size_t i = s.next++;
    co_await WaitUntil(s, s.start + Seconds(arrivals[i]));
    if (s.stopping) co_return;
    co_await RunOne(s, i);
  }
}

// Without a limit: each request is spawned at its arrival time.
asio::awaitable<void> Dispatcher(Shared& s, const std::vector<double>& arrivals) {
  auto ex = co_await asio::this_coro::executor;
  while (!s.stopping && s.next < s.workload.size()) {
    const std::size_t i = s.next++;
    co_await WaitUntil(s, s.start + Seconds(arrivals[i]));
    if (s.stopping) co_return;
    asio::co_spawn(ex, RunOne(s, i), asio::detached);
  }
}

}  // namespace

Status ParseBaseUrl(const std::string& url, Target* target) {
  static const std::regex re(R"(^http://([^/:\[\]]+|\[[0-9a-fA-F:.]+\])(?::(\d{1,5}))?/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    return Status::InvalidArgument("--base-url must look like http://HOST[:PORT] (got '" + url +
                                   "')");
  std::string host = m[1];
  if (host.front() == '[') host = host.substr(1, host.size() - 2);
  const int port = m[2].matched ? std::stoi(m[2]) : 80;
  if (port < 1 || port > 65535) return Status::InvalidArgument("--base-url port out of range");
  target->host = host;
  target->port = port;
  return Status::Ok();
}

Status HttpGet(const Target& target, const std::string& path, std::string* body, double timeout_s) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(target.host, std::to_string(target.port), ec);
  if (ec) return Status::IoError("cannot resolve " + target.host + ": " + ec.message());
  http::response<http::string_body> res;
  // Async with a deadline; run() returns when all is done or timed out.
  stream.expires_after(Seconds(timeout_s));
  beast::flat_buffer buffer;
  auto req = MakeRequest(target, http::verb::get, path, "");
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if ((ec = e)) return;
    http::async_write(stream, req, [&](beast::error_code e2, std::size_t) {
      if ((ec = e2)) return;
      http::async_read(stream, buffer, res, [&](beast::error_code e3, std::size_t) { ec = e3; });
    });
  });
  io.run();
  if (ec)
    return Status::IoError("GET http://" + target.host + ":" + std::to_string(target.port) + path +
                           ": " + ec.message());
  if (res.result_int() / 100 != 2)
    return Status::IoError("GET " + path + ": HTTP " + std::to_string(res.result_int()));
  *body = std::move(res.body());
  return Status::Ok();
}

std::string RequestBody(const RunOptions& o, const BenchRequest& r) {
  json body = {{"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"max_tokens", r.max_tokens},
               {"temperature", o.temperature},
               {"ignore_eos", o.ignore_eos}};
  if (!o.target.model.empty()) body["model"] = o.target.model;
  if (o.target.endpoint == "/v1/chat/completions") {
    std::string text = r.prompt_text;
    if (text.empty())
      for (auto t : r.prompt_ids) text += static_cast<char>(t);
    body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  } else if (!r.prompt_ids.empty()) {
    body["prompt"] = r.prompt_ids;
  } else {
    body["prompt"] = r.prompt_text;
  }
  return body.dump();
}

RunOutput Run(const RunOptions& o, const std::vector<BenchRequest>& workload) {
  asio::io_context io;
  Shared s{o, workload, {}, {}, {}, {}, 0, 0, 0, false, {}, {}};
  s.results.resize(workload.size());
  s.sent.assign(workload.size(), false);
  RunOutput out;
  beast::error_code ec;
  const auto endpoints =
      tcp::resolver(io).resolve(o.target.host, std::to_string(o.target.port), ec);
  if (ec || endpoints.empty()) {
    for (auto& r : s.results) r.failure = "cannot resolve " + o.target.host;
    out.results = std::move(s.results);
    return out;
  }
  s.endpoint = *endpoints.begin();
  const std::vector<double> arrivals = ArrivalTimes(workload.size(), o.request_rate, o.seed);
  s.start = Clock::now();

  // The time limit: stop sending, cancel what is in flight.
  asio::steady_timer deadline(io, Seconds(o.max_duration_s));
  deadline.async_wait([&](beast::error_code e) {
    if (e) return;
    s.stopping = true;
    for (beast::tcp_stream* stream : s.streams) stream->cancel();
  });
  asio::steady_timer ticker(io);
  std::function<void()> tick = [&] {
    ticker.expires_after(Seconds(o.progress_interval_s));
    ticker.async_wait([&](beast::error_code e) {
      if (e) return;
      if (o.progress) o.progress(s.done, workload.size(), Since(s.start));
      tick();
    });
  };
  if (o.progress) tick();

  auto ex = io.get_executor();
  if (o.max_concurrency > 0) {
    for (std::size_t w = 0; w < std::min(o.max_concurrency, workload.size()); ++w)
      asio::co_spawn(ex, Worker(s, arrivals), asio::detached);
  } else {
    asio::co_spawn(ex, Dispatcher(s, arrivals), asio::detached);
  }
  // Everything sent and answered (or the deadline passed): stop the timers.
  asio::co_spawn(
      ex,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer poll(co_await asio::this_coro::executor);
        while (!(s.done == workload.size() || (s.stopping && s.in_flight == 0))) {
          poll.expires_after(std::chrono::milliseconds(5));
          co_await poll.async_wait(asio::use_awaitable);
        }
        deadline.cancel();
        ticker.cancel();
      },
      asio::detached);
  io.run();
  out.duration_s = Since(s.start);
  if (o.progress) o.progress(s.done, workload.size(), out.duration_s);
  for (std::size_t i = 0; i < workload.size(); ++i) {
    if (s.sent[i])
      out.results.push_back(std::move(s.results[i]));
    else
      ++out.not_sent;
  }
  return out;
}

}  // namespace sightline::loadgen
