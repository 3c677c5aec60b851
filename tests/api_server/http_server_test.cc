// The HTTP server and the admin routes: /metrics negotiation and gzip,
// keep-alive, errors (404, 405, 413, malformed), /health going 503, SO_REUSEPORT
// and an inherited listening socket.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admin_routes.h"
#include "http/chunk_queue.h"
#include "http/http_protocol.h"
#include "http/http_server.h"
#include "support/http_client.h"
#include "support/loopback.h"
#include "support/raw_http.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using Client = sightline::testing::HttpClient;

std::string Gunzip(const std::string& in) {
  z_stream zs{};
  inflateInit2(&zs, 15 + 16);
  std::string out(1 << 20, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  inflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "api", &reg_)
                    .ok());
    HttpServerOptions o;
    o.port = 0;
    o.max_body_bytes = 1024;
    server_ = std::make_unique<HttpServer>(o);
    AddAdminRoutes(server_.get(), reg_.get(), [this] { return engine_alive_.load(); });
    server_->Route("POST", "/echo", [](const HttpRequest& r) {
      HttpResponse res;
      res.body = r.body;
      return res;
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  std::unique_ptr<metrics::Registry> reg_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<bool> engine_alive_{true};
};

TEST_F(HttpServerTest, MetricsNegotiationAndGzipOnOneKeepAliveConnection) {
  Client c(server_->port());
  auto plain = c.Request("GET", "/metrics");
  EXPECT_EQ(plain.result_int(), 200);
  EXPECT_EQ(plain["Content-Type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(plain.body().find("# TYPE sightline:registry_overflow_total counter"),
            std::string::npos);
  auto om = c.Request("GET", "/metrics",
                      {{"Accept", "application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"}});
  EXPECT_EQ(om["Content-Type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_TRUE(om.body().ends_with("# EOF\n"));
  auto gz = c.Request("GET", "/metrics", {{"Accept-Encoding", "gzip, deflate"}});
  EXPECT_EQ(gz["Content-Encoding"], "gzip");
  EXPECT_EQ(Gunzip(gz.body()), plain.body());
  EXPECT_LT(gz.body().size(), plain.body().size());
  // A weight of 0 refuses gzip (RFC 9110 §12.5.3): the page comes plain.
  auto refused = c.Request("GET", "/metrics", {{"Accept-Encoding", "gzip;q=0, identity"}});
  EXPECT_EQ(refused["Content-Encoding"], "");
  EXPECT_TRUE(refused.body().starts_with("# HELP")) << refused.body().substr(0, 40);
}

// Whole gzip members only, checked by zlib (another implementation): the
// whole member decoded (Z_STREAM_END, its CRC and length checked), nothing
// after it. nullopt if zlib refuses it.
std::optional<std::string> StrictGunzip(const std::string& in) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
  }
  const bool whole = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  if (!whole) return std::nullopt;
  return out;
}

// Gzip (igzip) at every level over a generated corpus, from empty to past
// its buffers: zeros, random bytes (incompressible: stored blocks), text
// like a metrics page, and halves of each; every size around 64 KiB.
TEST(Gzip, EveryLevelRoundTripsThroughZlibOverAGeneratedCorpus) {
  std::mt19937 rng(46);
  constexpr std::string_view kLine = "vllm:e2e_request_latency_seconds_bucket{le=\"0.3\"} 17\n";
  auto make = [&](int kind, std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
      switch (kind) {
        case 0:
          break;  // zeros
        case 1:
          s[i] = static_cast<char>(rng());
          break;
        case 2:
          s[i] = kLine[i % kLine.size()];
          break;
        default:
          s[i] = i < n / 2 ? static_cast<char>(rng()) : 'x';
      }
    }
    return s;
  };
  int cases = 0;
  for (std::size_t n :
       {0ul, 1ul, 2ul, 100ul, 4095ul, 65535ul, 65536ul, 65537ul, 131072ul, 300001ul, 2000000ul})
    for (int kind = 0; kind < 4; ++kind) {
      const std::string data = make(kind, n);
      for (int level = 0; level <= 3; ++level) {
        const std::string z = Gzip(data, level);
        const std::optional<std::string> back = StrictGunzip(z);
        ASSERT_TRUE(back.has_value())
            << "zlib refused level " << level << ", " << n << " bytes, kind " << kind;
        ASSERT_EQ(*back, data) << "level " << level << ", " << n << " bytes, kind " << kind;
        ++cases;
      }
    }
  EXPECT_EQ(cases, 11 * 4 * 4);
}

// Accept-Encoding as RFC 9110 §12.5.3 reads it: gzip (or x-gzip) listed with
// a weight above 0, or else "*" so; a weight of 0 refuses.
TEST(HttpProtocol, AcceptsGzipByTheWeights) {
  const struct {
    const char* header;
    bool gzip;
  } cases[] = {
      {"", false},
      {"gzip", true},
      {"GZIP", true},
      {"x-gzip", true},
      {"deflate, gzip;q=1.0, *;q=0.5", true},
      {"gzip;q=0", false},
      {"gzip; q=0.000", false},
      {"gzip;Q=0", false},
      {"gzip;q=0.001", true},
      {"gzip;q=0, *", false},  // listed by name: its own weight decides
      {"*", true},
      {"*;q=0", false},
      {"identity", false},
      {"nogzip, gzipped", false},  // neither is gzip
      {"br;q=1, gzip;q=0.8", true},
      {" gzip ; q=0.5 ", true},
      {"gzip;level=1", true},  // other parameters leave it acceptable
      {"gzip;q=bad", true},    // a weight that does not parse: as if absent
      {",,gzip,,", true},
  };
  for (const auto& c : cases) EXPECT_EQ(http_internal::AcceptsGzip(c.header), c.gzip) << c.header;
}

TEST_F(HttpServerTest, HealthPingVersionAndEngineDeath) {
  Client c(server_->port());
  EXPECT_EQ(c.Request("GET", "/health").result_int(), 200);
  EXPECT_EQ(c.Request("POST", "/ping").result_int(), 200);
  EXPECT_EQ(c.Request("GET", "/version").body(), "{\"version\":\"" SIGHTLINE_VERSION "\"}");
  engine_alive_ = false;
  auto dead = c.Request("GET", "/health");
  EXPECT_EQ(dead.result_int(), 503);
  EXPECT_NE(dead.body().find("\"error\""), std::string::npos);
}

TEST_F(HttpServerTest, ErrorsUseTheOpenAiBodyAndKeepTheServerUp) {
  Client c(server_->port());
  auto missing = c.Request("GET", "/v1/nothing");
  EXPECT_EQ(missing.result_int(), 404);
  EXPECT_NE(missing.body().find("\"type\":\"NotFoundError\""), std::string::npos) << missing.body();
  EXPECT_EQ(c.Request("DELETE", "/metrics").result_int(), 405);
  EXPECT_EQ(c.Request("POST", "/echo", {}, "hello").body(), "hello");
  Client big(server_->port());
  EXPECT_EQ(big.Request("POST", "/echo", {}, std::string(4096, 'x')).result_int(), 413);
  // A malformed request line gets a 400 and the server keeps serving others.
  {
    sightline::testing::RawSocket s(server_->port());
    ASSERT_TRUE(s.Send("NOT HTTP AT ALL\r\n\r\n"));
    EXPECT_NE(s.ReadSome(60).find("400"), std::string::npos);
  }
  EXPECT_EQ(Client(server_->port()).Request("GET", "/health").result_int(), 200);
}

TEST(HttpServer, ApiKeyGuardsAllButLivenessAndScraping) {
  std::unique_ptr<metrics::Registry> reg;
  ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                        "api", &reg)
                  .ok());
  HttpServerOptions o;
  o.port = 0;
  o.api_key = "s3cret";
  HttpServer server(o);
  AddAdminRoutes(&server, reg.get(), [] { return true; });
  ASSERT_TRUE(server.Start().ok());
  Client c(server.port());
  auto denied = c.Request("GET", "/version");
  EXPECT_EQ(denied.result_int(), 401);
  EXPECT_NE(denied.body().find("AuthenticationError"), std::string::npos);
  EXPECT_EQ(c.Request("GET", "/version", {{"Authorization", "Bearer wrong!"}}).result_int(), 401);
  EXPECT_EQ(c.Request("GET", "/version", {{"Authorization", "Bearer s3cret"}}).result_int(), 200);
  EXPECT_EQ(c.Request("GET", "/metrics").result_int(), 200);
  EXPECT_EQ(c.Request("GET", "/health").result_int(), 200);
  EXPECT_EQ(c.Request("GET", "/ping").result_int(), 200);
}

TEST(HttpServer, AsyncAnswersStreamsAndHangups) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  std::vector<std::thread> workers;
  server.RouteAsync("GET", "/later", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    workers.emplace_back([out] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      out->Send(HttpResponse{200, "text/plain", {}, "done"});
    });
  });
  server.RouteAsync("GET", "/stream", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->StartStream(200, "text/event-stream");
    workers.emplace_back([out] {
      for (const char* part : {"data: a\n\n", "data: b\n\n", "data: [DONE]\n\n"}) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        out->Write(part);
      }
      out->End();
    });
  });
  std::promise<void> hung_up;
  server.RouteAsync("GET", "/never", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->OnDisconnect([&hung_up] { hung_up.set_value(); });
  });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(Client(server.port()).Request("GET", "/later").body(), "done");
  auto streamed = Client(server.port()).Request("GET", "/stream");
  EXPECT_EQ(streamed["Content-Type"], "text/event-stream");
  EXPECT_TRUE(streamed.chunked());
  EXPECT_EQ(streamed.body(), "data: a\n\ndata: b\n\ndata: [DONE]\n\n");
  {
    sightline::testing::RawSocket s(server.port());
    ASSERT_TRUE(s.Send("GET /never HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // the client hangs up while the handler still owes an answer
  EXPECT_EQ(hung_up.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  for (auto& w : workers) w.join();
}

// Chunks queued while a write is under way go out together in one gathered
// write: the byte stream is exactly the chunks in order, then the last
// chunk. The client reads nothing for a while first, so that the kernel's
// buffers fill and thousands of chunks of generated sizes queue; the same
// holds for a stream read at once and for one whose last data comes with End.
// Through io_uring (what sockets take when the lane's writes go out, the rest
// when there is room) and through one sendmsg per write.
class GatheredWrites : public ::testing::TestWithParam<bool> {};

TEST_P(GatheredWrites, KeepTheByteStream) {
  HttpServerOptions o;
  o.port = 0;
  o.io_uring = GetParam();
  HttpServer server(o);
  std::vector<std::string> chunks;
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i)
    chunks.push_back("data: " + std::to_string(i) + std::string(rng() % 4000, 'a' + i % 26) +
                     "\n\n");
  std::vector<std::thread> workers;
  server.RouteAsync("GET", "/stream", [&](const HttpRequest&, std::shared_ptr<Responder> out) {
    out->StartStream(200, "text/event-stream");
    workers.emplace_back([out, &chunks] {
      for (const std::string& c : chunks) {  // in the buffers of chunks already written
        std::string buffer = out->ChunkBuffer();
        buffer.assign(c);
        out->Write(std::move(buffer));
      }
      out->End("data: [DONE]\n\n");
    });
  });
  ASSERT_TRUE(server.Start().ok());
  std::string want;
  for (const std::string& c : chunks) want += http_internal::ChunkWire(c);
  want += http_internal::ChunkWire("data: [DONE]\n\n") + "0\r\n\r\n";
  for (const double pause_s : {0.5, 0.0}) {
    sightline::testing::RawSocket s(server.port());
    ASSERT_TRUE(s.Send("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
    const std::string got = s.ReadUntil(60);  // until the server closes
    const std::size_t body = got.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << got.substr(0, 200);
    EXPECT_TRUE(got.substr(body + 4) == want)
        << "pause " << pause_s << ": " << got.size() - body - 4 << " bytes against " << want.size();
  }
  for (auto& w : workers) w.join();
}

INSTANTIATE_TEST_SUITE_P(IoUring, GatheredWrites, ::testing::Bool());

// A stream's header goes out in the stream's first write, with the chunks
// queued by then (it used to be a write of its own). Its bytes are still
// Beast's, for HTTP/1.1 (chunked), HTTP/1.0 (raw bytes, ended by the
// close) and HEAD (the header alone); a stream that ends before any chunk
// still sends its header.
TEST(HttpServer, StreamHeadersKeepTheirBytes) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  std::vector<std::thread> workers;
  std::mutex mu;
  server.RouteAsync("GET", "/stream", [&](const HttpRequest& r, std::shared_ptr<Responder> out) {
    out->StartStream(200, "text/event-stream", {{"X-Request-Id", "abc"}});
    const bool empty = r.query == "empty";
    std::lock_guard<std::mutex> g(mu);
    workers.emplace_back([out, empty] {
      if (!empty) out->Write("data: a\n\n");
      out->End(empty ? "" : "data: [DONE]\n\n");
    });
  });
  ASSERT_TRUE(server.Start().ok());
  const std::string fields =
      " 200 OK\r\nServer: sightline\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\nX-Request-Id: abc\r\n";
  // HTTP/1.1 keeps the connection after a stream (its last chunk ends the
  // body) unless the client said otherwise; HTTP/1.0 and HEAD close it.
  const std::string kept = "HTTP/1.1" + fields + "Transfer-Encoding: chunked\r\n\r\n";
  const std::string chunked =
      "HTTP/1.1" + fields + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  const std::string raw = "HTTP/1.0" + fields + "Connection: close\r\n\r\n";
  const std::string body = "data: a\n\ndata: [DONE]\n\n";
  const std::string chunks = http_internal::ChunkWire("data: a\n\n") +
                             http_internal::ChunkWire("data: [DONE]\n\n") + "0\r\n\r\n";
  const struct {
    std::string request, want;
    bool closes;
  } cases[] = {
      {"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", kept + chunks, false},
      {"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", chunked + chunks, true},
      {"GET /stream HTTP/1.0\r\n\r\n", raw + body, true},
      {"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n", chunked, true},
      {"GET /stream?empty HTTP/1.1\r\nHost: x\r\n\r\n", kept + "0\r\n\r\n", false},
  };
  for (const auto& c : cases) {
    sightline::testing::RawSocket s(server.port());
    // Twice on one connection where it is kept: the second request is
    // answered as the first was.
    for (int round = 0; round < (c.closes ? 1 : 2); ++round) {
      ASSERT_TRUE(s.Send(c.request));
      if (c.closes) {
        EXPECT_EQ(s.ReadUntil(30), c.want) << c.request;  // until the server closes
        EXPECT_TRUE(s.eof()) << c.request;
      } else {
        EXPECT_EQ(s.ReadUntil(30, "0\r\n\r\n"), c.want) << c.request << " round " << round;
        EXPECT_FALSE(s.ClosedWithin(0.2)) << c.request;
      }
    }
  }
  std::lock_guard<std::mutex> g(mu);
  for (auto& w : workers) w.join();
}

// A session's queue of chunks not yet being written, against std::deque:
// the order holds through generated pushes and takes, including the
// compactions that reuse the vector's front.
TEST(ChunkQueue, KeepsTheOrderOfADeque) {
  http_internal::ChunkQueue queue;
  std::deque<std::string> model;
  std::mt19937 rng(5);
  int next = 0;
  for (int step = 0; step < 5000; ++step) {
    for (unsigned pushes = rng() % 5; pushes > 0; --pushes) {
      const std::string chunk = "chunk " + std::to_string(next++) + std::string(rng() % 40, 'x');
      queue.push_back(chunk);
      model.push_back(chunk);
    }
    const std::size_t n = rng() % (queue.size() + 1);
    std::vector<std::string> taken;
    queue.PopFront(n, [&taken](std::string&& c) { taken.push_back(std::move(c)); });
    ASSERT_EQ(taken.size(), n);
    for (const std::string& c : taken) {
      ASSERT_EQ(c, model.front()) << "step " << step;
      model.pop_front();
    }
    ASSERT_EQ(queue.size(), model.size());
    ASSERT_EQ(queue.empty(), model.empty());
    if (rng() % 200 == 0) {
      queue.clear();
      model.clear();
    }
  }
}

// A chunk's framing against printf's hex, across the hex digits' edges; in
// place, a string with kChunkFraming bytes to spare is not reallocated (a
// streamed token's chunk is framed so).
TEST(HttpServer, ChunkFramingInPlace) {
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n < 4200; ++n) sizes.push_back(n);
  for (std::size_t n : {65535, 65536, 1048575, 1048576}) sizes.push_back(n);
  for (const std::size_t n : sizes) {
    std::string data(n, static_cast<char>('a' + n % 26));
    char line[32];
    std::snprintf(line, sizeof line, "%zx\r\n", n);
    const std::string want = line + data + "\r\n";
    ASSERT_EQ(http_internal::ChunkWire(data), want) << n;
    for (const bool room : {true, false}) {
      std::string framed;
      framed.reserve(n + (room ? http_internal::kChunkFraming : 0));
      framed = data;
      const char* before = framed.data();
      http_internal::FrameChunk(&framed);
      ASSERT_EQ(framed, want) << n;
      if (room) {
        ASSERT_EQ(framed.data(), before) << n << ": reallocated";
      }
    }
  }
}

TEST(HttpServer, SharesAPortWithSoReuseportAndAdoptsAnInheritedSocket) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer first(o);
  first.Route("GET", "/who", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", {}, "first"};
  });
  ASSERT_TRUE(first.Start().ok());
  o.port = first.port();
  HttpServer second(o);  // same port: both bound with SO_REUSEPORT
  second.Route("GET", "/who", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", {}, "second"};
  });
  ASSERT_TRUE(second.Start().ok());
  std::set<std::string> answered;
  for (int i = 0; i < 64 && answered.size() < 2; ++i)
    answered.insert(Client(o.port).Request("GET", "/who").body());
  EXPECT_EQ(answered.size(), 2u);  // the kernel spread new connections over both

  // A listening socket made by "the supervisor", handed over by fd.
  int port = 0;
  const int fd = sightline::testing::ListenLoopback(&port);
  ASSERT_GE(fd, 0);
  HttpServerOptions inherited;
  inherited.inherited_fd = fd;
  HttpServer third(inherited);
  third.Route("GET", "/who", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", {}, "third"};
  });
  ASSERT_TRUE(third.Start().ok());
  EXPECT_EQ(Client(third.port()).Request("GET", "/who").body(), "third");
}

}  // namespace
}  // namespace sightline::api
