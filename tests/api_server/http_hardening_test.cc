// HttpServer against hostile or unusual clients (issue 12, sections 1 and
// 3): nothing a client sends ends the process or a thread, HTTP framing as
// RFC 9110/9112 want it, deadlines, the connection cap, the file limit.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "api_server/http_raw_client.h"
#include "http/http_server.h"
#include "support/child_process.h"
#include "support/http_client.h"
#include "support/loopback.h"

namespace sightline::api {
namespace {

using sightline::testing::ParseResponse;
using sightline::testing::RawConnection;

HttpResponse Text(std::string body) {
  return HttpResponse{200, "text/plain", {}, std::move(body)};
}

// One request on a fresh connection, the response taken apart.
sightline::testing::RawResponse Exchange(int port, const std::string& bytes, double timeout_s = 5) {
  RawConnection c(port);
  c.Send(bytes);
  return ParseResponse(c.ReadResponse(timeout_s));
}

bool IsOpenAiError(const std::string& body, const std::string& type) {
  try {  // parse() throws on invalid UTF-8 as dump() would
    const auto j = nlohmann::json::parse(body);
    return j.at("error").at("type") == type && j["error"]["message"].is_string();
  } catch (const std::exception&) {
    return false;
  }
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(HttpServerOptions{}); }
  void Start(HttpServerOptions o) {
    o.port = 0;
    o.max_body_bytes = 1024;
    server_ = std::make_unique<HttpServer>(o);
    server_->Route("GET", "/health", [](const HttpRequest&) { return Text("ok"); });
    server_->Route("GET", "/text", [](const HttpRequest&) { return Text("hello"); });
    server_->Route("GET", "/query", [](const HttpRequest& r) { return Text(r.query); });
    server_->Route("POST", "/echo", [](const HttpRequest& r) { return Text(r.body); });
    server_->Route("GET", "/deny", [](const HttpRequest&) {
      return ErrorResponse(401, "no", "AuthenticationError");
    });
    server_->Route("GET", "/throw", [](const HttpRequest&) -> HttpResponse {
      throw std::runtime_error("handler bug");
    });
    server_->Route("GET", "/throw-other", [](const HttpRequest&) -> HttpResponse { throw 42; });
    server_->RouteAsync("GET", "/throw-async",
                        [](const HttpRequest&, std::shared_ptr<Responder> out) {
                          out->StartStream(200, "text/event-stream");
                          out->Write("data: never\n\n");
                          throw std::logic_error("async handler bug");
                        });
    server_->RouteAsync("GET", "/stream", [](const HttpRequest&, std::shared_ptr<Responder> out) {
      out->StartStream(200, "text/event-stream");
      out->Write("data: a\n\n");
      out->Write("data: b\n\n");
      out->End();
    });
    server_->RouteAsync(
        "GET", "/hangup-throws", [](const HttpRequest&, std::shared_ptr<Responder> out) {
          out->OnDisconnect([] { throw std::runtime_error("disconnect callback bug"); });
        });
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }
  int Health() { return Exchange(port_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").status; }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpHardeningTest, ExceptionsFromHandlersAre500sAndTheServerKeepsServing) {
  for (const char* path : {"/throw", "/throw-other", "/throw-async"}) {
    auto r = Exchange(port_, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(r.status, 500) << path;
    EXPECT_TRUE(IsOpenAiError(r.body, "InternalServerError")) << path << ": " << r.body;
    EXPECT_EQ(r.headers["connection"], "close") << path;
  }
  // One I/O thread: had an exception ended it, nothing would answer.
  EXPECT_EQ(Health(), 200);
}

TEST_F(HttpHardeningTest, AnExceptionEscapingTheIoLoopCostsOnlyItsConnection) {
  {
    RawConnection c(port_);
    c.Send("GET /hangup-throws HTTP/1.1\r\nHost: x\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // the hangup runs the throwing callback on the I/O thread
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Health(), 200);
  EXPECT_EQ(Health(), 200);
}

TEST_F(HttpHardeningTest, InvalidUtf8InTheTargetGetsAValidJsonError) {
  for (const std::string request :
       {"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
        "POST /v1/\xc3\x28 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
        "PUT /\x80 HTTP/1.1\r\nHost: a\r\n\r\n"}) {
    auto r = Exchange(port_, request);
    EXPECT_EQ(r.status, 404);
    EXPECT_TRUE(IsOpenAiError(r.body, "NotFoundError")) << r.body;
  }
  auto wrong = Exchange(port_, "DELETE /echo HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.headers["allow"], "POST");
  EXPECT_TRUE(IsOpenAiError(wrong.body, "BadRequestError"));
  EXPECT_EQ(Exchange(port_, "PUT /health HTTP/1.1\r\nHost: a\r\n\r\n").headers["allow"],
            "GET, HEAD");
  EXPECT_EQ(Health(), 200);
}

TEST_F(HttpHardeningTest, Http10StreamsAreCloseDelimitedNeverChunked) {
  RawConnection c(port_);
  c.Send("GET /stream HTTP/1.0\r\n\r\n");  // 1.0 needs no Host
  auto r = ParseResponse(c.ReadAll(5));
  EXPECT_TRUE(c.closed());  // the close ends the body
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.Has("transfer-encoding"));
  EXPECT_FALSE(r.Has("content-length"));
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_EQ(r.body, "data: a\n\ndata: b\n\n");
  // HTTP/1.1 still gets chunks.
  RawConnection c11(port_);
  c11.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r11 = ParseResponse(c11.ReadAll(5));
  EXPECT_EQ(r11.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r11.body, "9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n");
}

TEST_F(HttpHardeningTest, AbsoluteFormTargetsRouteByTheirPath) {
  auto r =
      Exchange(port_, "GET http://example.com:8000/text HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(Exchange(port_, "GET HTTP://h/query?x=1 HTTP/1.1\r\nHost: h\r\n\r\n").body, "x=1");
  EXPECT_EQ(Exchange(port_, "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n").status, 404);  // path "/"
}

TEST_F(HttpHardeningTest, Http11NeedsExactlyOneHost) {
  auto none = Exchange(port_, "GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(none.status, 400);
  EXPECT_TRUE(IsOpenAiError(none.body, "BadRequestError"));
  EXPECT_EQ(Exchange(port_, "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").status, 400);
  EXPECT_EQ(Exchange(port_, "GET /health HTTP/1.0\r\n\r\n").status, 200);
}

TEST_F(HttpHardeningTest, HeadIsGetWithoutTheBody) {
  RawConnection c(port_);
  // Pipelined: were a body sent after the HEAD answer, it would be read as
  // the start of the second response.
  c.Send(
      "HEAD /text HTTP/1.1\r\nHost: x\r\n\r\nGET /text HTTP/1.1\r\nHost: x\r\nConnection: "
      "close\r\n\r\n");
  const std::string all = c.ReadAll(5);
  const std::size_t end = all.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos);
  auto head = ParseResponse(all.substr(0, end + 4));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-length"], "5");
  auto get = ParseResponse(all.substr(end + 4));
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "hello");
  RawConnection c405(port_);  // a HEAD answer has no body, whatever its Content-Length
  c405.Send("HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  auto post_only = ParseResponse(c405.ReadHead(5));
  EXPECT_EQ(post_only.status, 405);
  EXPECT_EQ(post_only.headers["allow"], "POST");
}

TEST_F(HttpHardeningTest, TransferCodingsOtherThanChunkedAre501AndNeverMisframed) {
  // Beast alone would take the body as empty and answer the smuggled request.
  const std::string smuggled = "GET /text HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string te :
       {"Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked, gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"}) {
    RawConnection c(port_);
    c.Send("POST /echo HTTP/1.1\r\nHost: x\r\n" + te + "\r\n" + smuggled);
    const std::string all = c.ReadAll(5);
    EXPECT_TRUE(c.closed()) << te;
    auto r = ParseResponse(all);
    EXPECT_EQ(r.status, 501) << te;
    EXPECT_TRUE(
        IsOpenAiError(r.body.substr(0, RawConnection::ContentLength(all)), "NotImplementedError"))
        << te;
    EXPECT_EQ(all.find("HTTP/1.1", 1), std::string::npos) << te << ": answered twice:\n" << all;
  }
  auto chunked = Exchange(port_,
                          "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                          "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.body, "hello");
  EXPECT_EQ(
      Exchange(port_, "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").status,
      400);
}

TEST_F(HttpHardeningTest, Expect100ContinueIsAnsweredUnlessTheHeaderIsRefused) {
  RawConnection c(port_);
  c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.ReadHead(5), "HTTP/1.1 100 Continue\r\n\r\n");
  c.ReadResponse(0);  // consumes the interim response
  c.Send("hello");
  EXPECT_EQ(ParseResponse(c.ReadResponse(5)).body, "hello");

  RawConnection big(port_);  // over max_body_bytes: 413, no 100
  big.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n");
  auto r = ParseResponse(big.ReadResponse(5));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.headers["connection"], "close");
}

TEST(HttpHardening, BearerIsCaseInsensitiveAndEvery401NamesTheScheme) {
  HttpServerOptions o;
  o.port = 0;
  o.api_key = "s3cret";
  o.open_paths = {"/deny"};
  HttpServer server(o);
  server.Route("GET", "/text", [](const HttpRequest&) { return Text("hello"); });
  server.Route("POST", "/echo", [](const HttpRequest& r) { return Text(r.body); });
  server.Route("GET", "/deny",
               [](const HttpRequest&) { return ErrorResponse(401, "no", "AuthenticationError"); });
  ASSERT_TRUE(server.Start().ok());
  sightline::testing::HttpClient c(server.port());
  for (const char* good : {"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret "})
    EXPECT_EQ(c.Request("GET", "/text", {{"Authorization", good}}).result_int(), 200) << good;
  for (const char* bad : {"Basic s3cret", "Bearers3cret", "Bearer s3cre", "s3cret", "Bearer"}) {
    auto r = c.Request("GET", "/text", {{"Authorization", bad}});
    EXPECT_EQ(r.result_int(), 401) << bad;
    EXPECT_EQ(r["WWW-Authenticate"], "Bearer") << bad;
  }
  // A 401 a handler makes gets the header too.
  EXPECT_EQ(c.Request("GET", "/deny")["WWW-Authenticate"], "Bearer");
  // Refused on its header: no 100 Continue, and the body is never read.
  RawConnection raw(server.port());
  raw.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  auto r = ParseResponse(raw.ReadResponse(5));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
}

TEST(HttpHardening, AClientThatStopsReadingIsDroppedAfterTheWriteDeadline) {
  HttpServerOptions o;
  o.port = 0;
  o.write_timeout_s = 1;
  HttpServer server(o);
  std::promise<void> stream_dropped, body_dropped;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  server.RouteAsync("GET", "/flood", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->OnDisconnect([&] {
      stop = true;
      stream_dropped.set_value();
    });
    out->StartStream(200, "text/event-stream");
    workers.emplace_back([out, &stop] {  // a token stream the client never reads
      const std::string chunk(16384, 'x');
      for (int i = 0; i < 5000 && !stop; ++i) {
        out->Write(chunk);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  });
  server.RouteAsync("GET", "/big", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->OnDisconnect([&] { body_dropped.set_value(); });
    out->Send(Text(std::string(32u << 20, 'y')));
  });
  ASSERT_TRUE(server.Start().ok());
  RawConnection streamed(server.port(), 4096), whole(server.port(), 4096);
  streamed.Send("GET /flood HTTP/1.1\r\nHost: x\r\n\r\n");
  whole.Send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(stream_dropped.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_EQ(body_dropped.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  stop = true;
  for (auto& w : workers) w.join();
  EXPECT_TRUE(server.Drain(5));  // neither answer is still counted as under way
}

TEST(HttpHardening, SlowAndIdleClientsAreCutOffByTheReadDeadline) {
  HttpServerOptions o;
  o.port = 0;
  o.read_timeout_s = 1;
  HttpServer server(o);
  server.Route("GET", "/health", [](const HttpRequest&) { return Text("ok"); });
  ASSERT_TRUE(server.Start().ok());
  RawConnection idle(server.port());
  RawConnection slow(server.port());
  slow.Send("GET /health HTTP/1.1\r\nHost: x\r\n");
  // One header byte every 200 ms: 4 s of trickle against a 1 s deadline.
  for (int i = 0; i < 20 && !slow.closed(); ++i) {
    if (!slow.Send("X")) break;
    slow.ReadUntil([](const std::string&) { return false; }, 0.2);
  }
  EXPECT_TRUE(slow.closed());
  idle.ReadAll(3);
  EXPECT_TRUE(idle.closed());
  EXPECT_EQ(Exchange(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
}

TEST(HttpHardening, ConnectionsBeyondTheCapGet503AndHealthRecovers) {
  HttpServerOptions o;
  o.port = 0;
  o.max_connections = 3;
  HttpServer server(o);
  server.Route("GET", "/health", [](const HttpRequest&) { return Text("ok"); });
  ASSERT_TRUE(server.Start().ok());
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 6; ++i) flood.push_back(std::make_unique<RawConnection>(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted
  RawConnection fresh(server.port());
  fresh.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  auto refused = ParseResponse(fresh.ReadResponse(2));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers["connection"], "close");
  EXPECT_TRUE(IsOpenAiError(refused.body, "ServiceUnavailableError")) << refused.body;
  flood.clear();
  int status = 0;
  for (int i = 0; i < 30 && status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = Exchange(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").status;
  }
  EXPECT_EQ(status, 200);
}

// With several I/O threads, accepting and closing the acceptor (draining,
// stopping) run on one strand; connections arriving meanwhile are served or
// refused, never crash.
TEST(HttpHardening, AcceptingWhileStoppingWithManyThreads) {
  for (int round = 0; round < 10; ++round) {
    HttpServerOptions o;
    o.port = 0;
    o.threads = 4;
    HttpServer server(o);
    server.Route("GET", "/health", [](const HttpRequest&) { return Text("ok"); });
    ASSERT_TRUE(server.Start().ok());
    std::atomic<bool> done{false};
    std::thread client([&] {
      while (!done) Exchange(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 0.5);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (round % 2) server.StopAccepting();
    server.Stop();
    done = true;
    client.join();
  }
}

// A responder that outlives its request (a handler answering twice, a late
// worker) must not answer the next request on the same connection.
TEST(HttpHardening, AStaleResponderCannotAnswerTheNextRequest) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  std::shared_ptr<Responder> first, second;
  std::promise<void> second_waiting;
  server.RouteAsync("GET", "/first", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    first = out;
    out->Send(Text("first"));
  });
  server.RouteAsync("GET", "/second", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    second = out;
    second_waiting.set_value();
  });
  ASSERT_TRUE(server.Start().ok());
  RawConnection c(server.port());
  c.Send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ParseResponse(c.ReadResponse(5)).body, "first");
  c.Send("GET /second HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(second_waiting.get_future().wait_for(std::chrono::seconds(5)),
            std::future_status::ready);
  first->Send(Text("stale"));
  first->StartStream(200, "text/plain");
  first->Write("stale chunk");
  first->End();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  second->Send(Text("second"));
  auto r = ParseResponse(c.ReadResponse(5));
  EXPECT_EQ(r.body, "second");
}

// Drain waits for the answers under way, exactly, and no longer.
TEST(HttpHardening, DrainWaitsForAnswersUnderWay) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  std::vector<std::thread> workers;
  server.RouteAsync("GET", "/later", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    workers.emplace_back([out] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      out->Send(Text("done"));
    });
  });
  ASSERT_TRUE(server.Start().ok());
  RawConnection c(server.port());
  c.Send("GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(server.Drain(0.05));  // still under way
  EXPECT_TRUE(server.Drain(5));
  EXPECT_EQ(ParseResponse(c.ReadResponse(5)).body, "done");
  for (auto& w : workers) w.join();
}

// Requests pipelined on one kept connection: a control path's answer, then
// a stream (the connection moves to the I/O threads with the stream's request
// already read), then a whole answer after the stream. Each is answered in
// order, the last right after the stream's last chunk, and once all are,
// nothing is counted as under way: Drain returns.
TEST(HttpHardening, PipelinedRequestsAcrossLanesAndAStreamLeaveNothingUnderWay) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  std::vector<std::thread> workers;
  std::mutex mu;
  server.Route("GET", "/health", [](const HttpRequest&) { return Text("ok"); });
  server.RouteAsync("GET", "/stream", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->StartStream(200, "text/event-stream");
    std::lock_guard<std::mutex> g(mu);
    workers.emplace_back([out] {
      out->Write("data: a\n\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      out->End("data: [DONE]\n\n");
    });
  });
  server.RouteAsync("GET", "/later", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    std::lock_guard<std::mutex> g(mu);
    workers.emplace_back([out] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      out->Send(Text("done"));
    });
  });
  ASSERT_TRUE(server.Start().ok());
  RawConnection c(server.port());
  c.Send(
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /stream HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ParseResponse(c.ReadResponse(10)).body, "ok");
  // Everything after the health answer: the stream, then /later's answer.
  const std::string all =
      c.ReadUntil([](const std::string& s) { return s.find("done") != s.npos; }, 10);
  const std::size_t end = all.find("\r\n0\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << all;
  EXPECT_NE(all.substr(0, end).find("data: [DONE]"), std::string::npos) << all;
  const std::string rest = all.substr(end + 7);
  EXPECT_EQ(rest.rfind("HTTP/1.1 200", 0), 0u) << rest;
  EXPECT_NE(rest.find("done"), std::string::npos) << rest;
  EXPECT_TRUE(server.Drain(5));  // nothing is counted as under way
  std::lock_guard<std::mutex> g(mu);
  for (auto& w : workers) w.join();
}

// `sightline` raises its soft descriptor limit to the hard one at start-up.
TEST(HttpHardening, SightlineRaisesItsFileLimitToTheHardLimit) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 512) GTEST_SKIP() << "hard limit too low to observe a raise";
  const std::string name = "sightline-http-rlimit-" + std::to_string(getpid());
  int port = 0;
  const int probe = sightline::testing::ListenLoopback(&port);
  ASSERT_GE(probe, 0);
  close(probe);
  const std::vector<std::string> args = {SIGHTLINE_CLI,     "api-server",
                                         "--engine-input",  "ipc:///tmp/" + name + ".in",
                                         "--engine-output", "ipc:///tmp/" + name + ".out",
                                         "--registry",      name,
                                         "--port",          std::to_string(port)};
  // The child starts with a low soft limit; the API server waits for its
  // (absent) registry long enough to be looked at.
  auto api = sightline::testing::ChildProcess::Spawn([&args](const auto&) {
    rlimit low{};
    getrlimit(RLIMIT_NOFILE, &low);
    low.rlim_cur = 256;
    setrlimit(RLIMIT_NOFILE, &low);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    return 127;
  });
  const std::string want = std::to_string(limit.rlim_max);
  std::string soft, hard;
  for (int i = 0; i < 100 && soft != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in("/proc/" + std::to_string(api.pid()) + "/limits");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("Max open files", 0) == 0) std::istringstream(line.substr(14)) >> soft >> hard;
  }
  EXPECT_EQ(soft, want);
  api.KillAndWait(SIGKILL);
  std::filesystem::remove("/tmp/" + name + ".in");
  std::filesystem::remove("/tmp/" + name + ".out");
}

}  // namespace
}  // namespace sightline::api
