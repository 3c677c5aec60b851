// The HTTP families (METRICS.md §6) against a real HttpServer: every request
// whose request line was read is counted exactly once, whatever answers it
// (a handler, 401, 404, 405, 413, a malformed header, a handler that threw,
// a stream, a client that left, a server that stopped), with the route
// template, the method as sent and the grouped status; input without a
// request line and the excluded routes count nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "admin_routes.h"
#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "support/http_client.h"
#include "support/raw_http.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using sightline::testing::ParseSamples;
using sightline::testing::RawExchange;
using sightline::testing::RawSocket;
using sightline::testing::StatusOf;

constexpr const char* kKey = "secret";
const std::string kAuth = "Authorization: Bearer secret\r\n";

class HttpMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "api", &reg_)
                    .ok());
    // --disable-log-stats: the HTTP families stay.
    ASSERT_TRUE(RequestMetrics::Create(reg_.get(), "tiny", 4096, true, &metrics_).ok());
    HttpServerOptions o;
    o.port = 0;
    o.max_body_bytes = 1024;
    o.api_key = kKey;
    o.on_exchange = [m = metrics_.get()](const HttpExchange& e) { m->OnHttp(e); };
    server_ = std::make_unique<HttpServer>(o);
    AddAdminRoutes(server_.get(), reg_.get(), [] { return true; });
    server_->Route("POST", "/echo", [](const HttpRequest& r) {
      HttpResponse res;
      res.body = r.body;
      return res;
    });
    server_->Route("GET", "/throw", [](const HttpRequest&) -> HttpResponse {
      throw std::runtime_error("a defect");
    });
    server_->RouteAsync("GET", "/stream", [](const HttpRequest&, std::shared_ptr<Responder> out) {
      out->StartStream(200, "text/event-stream");
      out->Write("abc");
      out->End("defg");
    });
    // Answers nothing (or only the stream's header and a chunk) until the
    // test lets go: the client leaves, or the server stops, first.
    server_->RouteAsync(
        "GET", "/stall",
        [this](const HttpRequest&, std::shared_ptr<Responder> out) { Keep(std::move(out)); });
    server_->RouteAsync("GET", "/stall-stream",
                        [this](const HttpRequest&, std::shared_ptr<Responder> out) {
                          out->StartStream(200, "text/event-stream");
                          out->Write("x");
                          Keep(std::move(out));
                        });
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
  }
  void TearDown() override {
    server_.reset();
    std::lock_guard<std::mutex> g(mu_);
    kept_.clear();
  }
  void Keep(std::shared_ptr<Responder> out) {
    std::lock_guard<std::mutex> g(mu_);
    kept_.push_back(std::move(out));
  }

  std::map<std::string, double> Page() {
    return ParseSamples(reg_->Render(metrics::ExpositionFormat::kPrometheusText));
  }
  static std::string Requests(const std::string& handler, const std::string& method,
                              const std::string& status) {
    return "http_requests_total{handler=\"" + handler + "\",method=\"" + method + "\",status=\"" +
           status + "\"}";
  }
  static double Sum(const std::map<std::string, double>& p, const std::string& prefix) {
    double total = 0;
    for (const auto& [key, value] : p)
      if (key.rfind(prefix, 0) == 0) total += value;
    return total;
  }
  static double At(const std::map<std::string, double>& p, const std::string& key) {
    const auto it = p.find(key);
    return it == p.end() ? 0 : it->second;
  }
  // What one request should have moved, between two pages.
  struct Delta {
    std::string handler, method, status;
    double request_bytes = 0, response_bytes = 0;
  };
  static void ExpectOne(const std::map<std::string, double>& before,
                        const std::map<std::string, double>& after, const Delta& d) {
    const std::string h = "{handler=\"" + d.handler + "\"}";
    EXPECT_EQ(At(after, Requests(d.handler, d.method, d.status)) -
                  At(before, Requests(d.handler, d.method, d.status)),
              1);
    EXPECT_EQ(Sum(after, "http_requests_total") - Sum(before, "http_requests_total"), 1);
    EXPECT_EQ(At(after, "http_request_size_bytes_count" + h) -
                  At(before, "http_request_size_bytes_count" + h),
              1);
    EXPECT_EQ(At(after, "http_request_size_bytes_sum" + h) -
                  At(before, "http_request_size_bytes_sum" + h),
              d.request_bytes);
    EXPECT_EQ(At(after, "http_response_size_bytes_count" + h) -
                  At(before, "http_response_size_bytes_count" + h),
              1);
    EXPECT_EQ(At(after, "http_response_size_bytes_sum" + h) -
                  At(before, "http_response_size_bytes_sum" + h),
              d.response_bytes);
    EXPECT_EQ(At(after, "http_request_duration_highr_seconds_count") -
                  At(before, "http_request_duration_highr_seconds_count"),
              1);
    const std::string hm = "{handler=\"" + d.handler + "\",method=\"" + d.method + "\"}";
    EXPECT_EQ(At(after, "http_request_duration_seconds_count" + hm) -
                  At(before, "http_request_duration_seconds_count" + hm),
              1);
  }
  // The page once `total` requests are counted (a client that left is
  // counted when the server notices), within a bounded wait.
  std::map<std::string, double> PageOnceCounted(double total) {
    for (int i = 0; i < 500; ++i) {
      auto p = Page();
      if (Sum(p, "http_requests_total") >= total) return p;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Page();
  }
  // One raw request on its own connection, asking the server to close after
  // it; the whole answer.
  std::string Exchange(std::string wire) {
    const std::size_t line = wire.find("\r\n");
    if (line != std::string::npos) wire.insert(line + 2, "Connection: close\r\n");
    return RawExchange(port_, wire, 5);
  }

  std::unique_ptr<metrics::Registry> reg_;
  std::unique_ptr<RequestMetrics> metrics_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::shared_ptr<Responder>> kept_;
};

TEST_F(HttpMetricsTest, EveryKindOfAnswerCountsOnceWithTemplateMethodAndGroupedStatus) {
  struct Case {
    const char* what;
    std::string wire;
    int status;
    Delta delta;
  };
  const std::string body(5, 'b');
  const std::vector<Case> cases = {
      {"success",
       "POST /echo?x=1 HTTP/1.1\r\nHost: h\r\n" + kAuth + "Content-Length: 5\r\n\r\n" + body,
       200,
       {"/echo", "POST", "2xx", 5, 5}},
      {"unknown path",
       "GET /nowhere HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       404,
       {"none", "GET", "4xx"}},
      {"method not allowed",
       "GET /echo HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       405,
       {"/echo", "GET", "4xx"}},
      {"no API key",
       "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n" + body,
       401,
       {"/echo", "POST", "4xx", 5}},
      {"body too large",
       "POST /echo HTTP/1.1\r\nHost: h\r\n" + kAuth + "Content-Length: 5000\r\n\r\n",
       413,
       {"/echo", "POST", "4xx", 5000}},
      {"malformed header field",
       "POST /echo HTTP/1.1\r\nHost: h\r\nno colon here\r\n\r\n",
       400,
       {"/echo", "POST", "4xx"}},
      {"two Host fields",
       "GET /nowhere HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
       400,
       {"none", "GET", "4xx"}},
      {"a method as sent",
       "PATCH /echo HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       405,
       {"/echo", "PATCH", "4xx"}},
      // Any other token a client sends as a method is "other": each label
      // value is a series in the shared registry for the instance's life.
      {"a WebDAV method",
       "PROPFIND /echo HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       405,
       {"/echo", "other", "4xx"}},
      {"an invented method",
       "M1234567 /nowhere HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       404,
       {"none", "other", "4xx"}},
      {"handler threw",
       "GET /throw HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       500,
       {"/throw", "GET", "5xx"}},
      // The payload bytes of every chunk, the last one (End's) included.
      {"stream",
       "GET /stream HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       200,
       {"/stream", "GET", "2xx", 0, 7}},
      {"stream to HTTP/1.0",
       "GET /stream HTTP/1.0\r\n" + kAuth + "\r\n",
       200,
       {"/stream", "GET", "2xx", 0, 7}},
      {"HEAD sends no body",
       "HEAD /nowhere HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n",
       404,
       {"none", "HEAD", "4xx", 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto before = Page();
    const std::string answer = Exchange(c.wire);
    ASSERT_EQ(StatusOf(answer), c.status) << answer;
    Delta d = c.delta;
    // A whole answer's body is what the client got (error bodies included).
    if (d.response_bytes == 0 && c.status != 200 && d.method != "HEAD")
      d.response_bytes = static_cast<double>(sightline::testing::BodyOf(answer).size());
    ExpectOne(before, Page(), d);
  }
}

TEST_F(HttpMetricsTest, KeepAliveRequestsCountOnceEach) {
  const auto before = Page();
  sightline::testing::HttpClient c(port_);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.Request("POST", "/echo", {{"Authorization", "Bearer secret"}}, "hi").result_int(),
              200);
  const auto after = Page();
  EXPECT_EQ(
      At(after, Requests("/echo", "POST", "2xx")) - At(before, Requests("/echo", "POST", "2xx")),
      3);
  EXPECT_EQ(At(after, "http_request_size_bytes_sum{handler=\"/echo\"}") -
                At(before, "http_request_size_bytes_sum{handler=\"/echo\"}"),
            6);
}

TEST_F(HttpMetricsTest, ExcludedRoutesAndInputWithoutARequestLineCountNothing) {
  const auto before = Page();
  for (const char* path : {"/metrics", "/health", "/ping", "/version"})
    EXPECT_EQ(StatusOf(Exchange(std::string("GET ") + path + " HTTP/1.1\r\nHost: h\r\n" + kAuth +
                                "\r\n")),
              200)
        << path;
  EXPECT_EQ(StatusOf(Exchange("POST /ping HTTP/1.1\r\nHost: h\r\n\r\n")), 200);
  // Refused, yet on an excluded route: still not counted.
  EXPECT_EQ(StatusOf(Exchange("GET /version HTTP/1.1\r\nHost: h\r\n\r\n")), 401);
  EXPECT_EQ(StatusOf(Exchange("DELETE /metrics HTTP/1.1\r\nHost: h\r\n\r\n")), 405);
  // Excluded paths this server has no route for (/load without load
  // tracking, /server_info): a 404, still not counted (not as "none").
  for (const char* path : {"/load", "/server_info"})
    EXPECT_EQ(StatusOf(Exchange(std::string("GET ") + path + " HTTP/1.1\r\nHost: h\r\n" + kAuth +
                                "\r\n")),
              404)
        << path;
  // No request line: garbage, a bare connection, a request line cut short.
  EXPECT_EQ(StatusOf(Exchange("\x01\x02 not http\r\n\r\n")), 400);
  { RawSocket idle(port_); }
  {
    RawSocket partial(port_);
    ASSERT_TRUE(partial.Send("GET /echo HT"));
  }
  EXPECT_EQ(StatusOf(Exchange("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n")), 200);  // a later scrape
  const auto after = Page();
  EXPECT_EQ(Sum(after, "http_requests_total"), Sum(before, "http_requests_total"));
  EXPECT_EQ(At(after, "http_request_duration_highr_seconds_count"),
            At(before, "http_request_duration_highr_seconds_count"));
  for (const auto& [key, value] : after) EXPECT_EQ(key.find("/metrics"), std::string::npos) << key;
}

TEST_F(HttpMetricsTest, AClientThatLeavesIsCountedOnce) {
  const double start = Sum(Page(), "http_requests_total");
  {  // before any answer: 499, grouped 4xx
    RawSocket c(port_);
    ASSERT_TRUE(c.Send("GET /stall HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // dispatched
  }
  auto p = PageOnceCounted(start + 1);
  EXPECT_EQ(At(p, Requests("/stall", "GET", "4xx")), 1);
  {  // mid-stream: the status sent, the bytes sent
    RawSocket c(port_);
    ASSERT_TRUE(c.Send("GET /stall-stream HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n"));
    EXPECT_EQ(StatusOf(c.ReadUntil(5, "\r\n1\r\nx\r\n")), 200);
  }
  p = PageOnceCounted(start + 2);
  EXPECT_EQ(At(p, Requests("/stall-stream", "GET", "2xx")), 1);
  EXPECT_EQ(At(p, "http_response_size_bytes_sum{handler=\"/stall-stream\"}"), 1);
  {  // the body never comes
    RawSocket c(port_);
    ASSERT_TRUE(
        c.Send("POST /echo HTTP/1.1\r\nHost: h\r\n" + kAuth + "Content-Length: 9\r\n\r\nab"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  p = PageOnceCounted(start + 3);
  EXPECT_EQ(At(p, Requests("/echo", "POST", "4xx")), 1);
  EXPECT_EQ(At(p, "http_request_size_bytes_sum{handler=\"/echo\"}"), 9);
  // Late answers for requests already counted change nothing.
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& out : kept_) {
      out->Send(HttpResponse{});
      out->End();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Sum(Page(), "http_requests_total"), start + 3);
}

TEST_F(HttpMetricsTest, ARequestUnansweredWhenTheServerStopsIsCountedOnce) {
  RawSocket c(port_);
  ASSERT_TRUE(c.Send("GET /stall HTTP/1.1\r\nHost: h\r\n" + kAuth + "\r\n"));
  for (int i = 0; i < 500; ++i) {  // dispatched
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!kept_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server_.reset();
  const auto p = Page();
  EXPECT_EQ(At(p, Requests("/stall", "GET", "5xx")), 1);
  EXPECT_EQ(Sum(p, "http_requests_total"), 1);
}

}  // namespace
}  // namespace sightline::api
