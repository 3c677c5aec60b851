// The HTTP server's two lanes (HttpServerOptions::control_paths): scrapes and
// probes are answered on the control thread whatever the I/O threads are
// doing; a connection that asks for another path moves to the I/O threads
// with everything it sent, once, and is counted once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/http_core.h"
#include "http/http_protocol.h"
#include "http/http_server.h"
#include "sightline/wake_batch.h"
#include "support/raw_http.h"

namespace sightline::api {
namespace http_lanes_test {

using sightline::testing::BodyOf;
using sightline::testing::RawExchange;
using sightline::testing::RawSocket;
using sightline::testing::StatusOf;

HttpResponse Plain(std::string body) {
  return HttpResponse{200, "text/plain", {}, std::move(body)};
}

std::string Get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

std::string PostEcho(const std::string& body, const std::string& extra = "") {
  return "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra + "\r\n" + body;
}

void AddEcho(HttpServer* server) {
  server->Route("POST", "/echo", [](const HttpRequest& r) { return Plain(r.body); });
}

// While a handler holds the only I/O thread, /metrics and /health are still
// answered (before the lanes, both waited for it); a request for another
// path is read meanwhile and answered once the thread is free.
TEST(HttpLanes, ScrapesAndProbesAreAnsweredWhileTheIoThreadIsHeld) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer server(o);
  // Shared with the handler, which may outlive this scope if an assertion
  // below fails while it waits.
  auto entered = std::make_shared<std::promise<void>>();
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  std::future<void> in_handler = entered->get_future();
  server.Route("GET", "/hold", [entered, released](const HttpRequest&) {
    entered->set_value();
    released.wait_for(std::chrono::seconds(120));
    return Plain("held");
  });
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Plain("page"); });
  server.Route("GET", "/health", [](const HttpRequest&) { return Plain(""); });
  AddEcho(&server);
  ASSERT_TRUE(server.Start().ok());
  // Whatever happens below, the handler lets go before the server stops.
  struct Releaser {
    std::shared_ptr<std::promise<void>> release;
    ~Releaser() {
      try {
        release->set_value();
      } catch (const std::future_error&) {  // already released
      }
    }
  } releaser{release};

  RawSocket hold(server.port());
  ASSERT_TRUE(hold.Send(Get("/hold")));
  ASSERT_EQ(in_handler.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  RawSocket echo(server.port());
  ASSERT_TRUE(echo.Send(PostEcho("waits")));

  const std::string scrape =
      RawExchange(server.port(), Get("/metrics", "Connection: close\r\n"), 30);
  EXPECT_EQ(StatusOf(scrape), 200) << scrape;
  EXPECT_EQ(BodyOf(scrape), "page");
  const std::string probe = RawExchange(server.port(), Get("/health", "Connection: close\r\n"), 30);
  EXPECT_EQ(StatusOf(probe), 200) << probe;
  EXPECT_EQ(echo.ReadUntil(0.2), "");  // the I/O thread is still held

  release->set_value();
  const std::string held = hold.ReadUntil(30, "held");
  EXPECT_EQ(StatusOf(held), 200) << held;
  const std::string echoed = echo.ReadUntil(30, "waits");
  EXPECT_EQ(StatusOf(echoed), 200) << echoed;
  EXPECT_EQ(BodyOf(echoed), "waits");
}

// One keep-alive connection: a probe (control thread), then pipelined
// requests sent in one piece (the move takes the bytes already read), a body
// sent after 100 Continue (from the I/O thread), and a scrape once it has
// moved. Each is answered in order, and the exchanges are reported once each.
TEST(HttpLanes, AConnectionMovesWithEverythingItSent) {
  HttpServerOptions o;
  o.port = 0;
  std::atomic<int> echo_exchanges{0}, other_exchanges{0};
  o.on_exchange = [&](const HttpExchange& e) {
    (e.handler == "/echo" ? echo_exchanges : other_exchanges)++;
  };
  HttpServer server(o);
  server.Route("GET", "/health", [](const HttpRequest&) { return Plain("[alive]"); });
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Plain("[page]"); });
  AddEcho(&server);
  ASSERT_TRUE(server.Start().ok());

  RawSocket c(server.port());
  ASSERT_TRUE(c.Send(Get("/health")));
  std::string got = c.ReadUntil(30, "[alive]");
  EXPECT_EQ(StatusOf(got), 200) << got;

  ASSERT_TRUE(c.Send(PostEcho("[first]") + Get("/health") + PostEcho("[second]")));
  got = c.ReadUntil(30, "[second]");
  const std::size_t first = got.find("[first]"), alive = got.find("[alive]"),
                    second = got.find("[second]");
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_LT(first, alive) << got;
  EXPECT_LT(alive, second) << got;

  const std::string later = "[later]";
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(later.size()) + "\r\nExpect: 100-continue\r\n\r\n"));
  got = c.ReadUntil(30, "100 Continue\r\n\r\n");
  EXPECT_EQ(StatusOf(got), 100) << got;
  ASSERT_TRUE(c.Send(later));
  got = c.ReadUntil(30, later);
  EXPECT_EQ(StatusOf(got), 200) << got;

  ASSERT_TRUE(c.Send(Get("/metrics")));
  got = c.ReadUntil(30, "[page]");
  EXPECT_EQ(StatusOf(got), 200) << got;
  // /health and /metrics are not instrumented; each /echo is reported once,
  // before the client could read its answer.
  EXPECT_EQ(echo_exchanges.load(), 3);
  EXPECT_EQ(other_exchanges.load(), 0);
  server.Stop();  // every session gone: none reports late
  EXPECT_EQ(echo_exchanges.load(), 3);
  EXPECT_EQ(other_exchanges.load(), 0);
}

// Under a cap of two connections, twenty connections that moved and closed
// leave the count at zero: two new ones are admitted, a third is refused.
// Were a moved connection counted twice or never, the count would drift and
// the cap with it.
TEST(HttpLanes, MovedConnectionsAreCountedOnce) {
  HttpServerOptions o;
  o.port = 0;
  o.max_connections = 2;
  HttpServer server(o);
  AddEcho(&server);
  ASSERT_TRUE(server.Start().ok());
  // A connection that is admitted and moves, retried while closed ones are
  // still being let go (a session ends after the client's close is read).
  auto admitted = [&]() -> std::unique_ptr<RawSocket> {
    for (int i = 0; i < 300; ++i) {
      auto c = std::make_unique<RawSocket>(server.port());
      if (c->Send(PostEcho("[in]")) && StatusOf(c->ReadUntil(30, "[in]")) == 200) return c;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nullptr;
  };
  for (int i = 0; i < 20; ++i) ASSERT_NE(admitted(), nullptr) << i;
  const auto a = admitted(), b = admitted();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string third = RawExchange(server.port(), PostEcho("[out]"), 30);
  EXPECT_EQ(StatusOf(third), 503) << third;
}

// Connections arriving and moving while the server stops, with several I/O
// threads: each is served or dropped, nothing crashes or leaks (the
// sanitizer build runs this).
TEST(HttpLanes, StoppingWhileConnectionsMove) {
  for (int round = 0; round < 10; ++round) {
    HttpServerOptions o;
    o.port = 0;
    o.threads = 3;
    auto server = std::make_unique<HttpServer>(o);
    AddEcho(server.get());
    ASSERT_TRUE(server->Start().ok());
    const int port = server->port();
    std::atomic<bool> done{false};
    std::atomic<int> answered{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 3; ++t)
      clients.emplace_back([&] {
        while (!done) {
          RawSocket c(port);
          if (c.Send(PostEcho("[x]")) && StatusOf(c.ReadUntil(5, "[x]")) == 200) ++answered;
        }
      });
    // Some answered (the loop is under way), then the stop, at a point that
    // varies from round to round.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (answered.load() < 1 + round && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GE(answered.load(), 1 + round);
    server.reset();  // stops with connections mid-move
    done = true;
    for (auto& c : clients) c.join();
  }
}

// Sixteen streams written at once by two threads, with the ends from a
// third: every call for the one I/O thread's connections goes through one
// queue, run there in order (LaneQueue), so each client gets exactly its
// chunks, in order, then the end; and the same with three I/O threads,
// where each connection posts to its strand instead. Each chunk is built in
// the buffer ChunkBuffer() hands out: on the lane, written chunks' buffers,
// of any stream.
TEST(HttpLanes, ManyStreamsWrittenFromSeveralThreadsKeepTheirBytes) {
  constexpr int kStreams = 16, kChunks = 400;
  for (const int threads : {1, 3}) {
    HttpServerOptions o;
    o.port = 0;
    o.threads = threads;
    HttpServer server(o);
    std::mutex mu;
    std::vector<std::pair<int, std::shared_ptr<Responder>>> streams;
    server.RouteAsync("GET", "/stream", [&](const HttpRequest& r, std::shared_ptr<Responder> out) {
      out->StartStream(200, "text/event-stream");
      std::lock_guard<std::mutex> g(mu);
      streams.emplace_back(std::stoi(r.query.substr(2)), std::move(out));  // "i=<n>"
    });
    ASSERT_TRUE(server.Start().ok());
    auto chunk = [](int stream, int i) {
      return "data: " + std::to_string(stream) + "/" + std::to_string(i) + "\n\n";
    };
    std::vector<std::unique_ptr<RawSocket>> clients;
    for (int i = 0; i < kStreams; ++i) {
      clients.push_back(std::make_unique<RawSocket>(server.port()));
      ASSERT_TRUE(
          clients.back()->Send(Get("/stream?i=" + std::to_string(i), "Connection: close\r\n")));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      {
        std::lock_guard<std::mutex> g(mu);
        if (streams.size() == kStreams) break;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The two writers take turns: chunk i of every stream comes from writer
    // i % 2, so each stream's consecutive chunks come from both threads.
    std::atomic<int> turn{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < 2; ++w)
      writers.emplace_back([&, w] {
        for (int i = w; i < kChunks; i += 2) {
          while (turn.load() != i) std::this_thread::yield();
          for (const auto& [id, out] : streams) {  // in buffers other streams' chunks had
            std::string buffer = out->ChunkBuffer();
            buffer.assign(chunk(id, i));
            out->Write(std::move(buffer));
          }
          turn.store(i + 1);
        }
      });
    for (auto& w : writers) w.join();
    std::thread ender([&] {
      for (const auto& [id, out] : streams) out->End("data: [DONE]\n\n");
    });
    ender.join();
    for (int i = 0; i < kStreams; ++i) {
      std::string want;
      for (int k = 0; k < kChunks; ++k) want += http_internal::ChunkWire(chunk(i, k));
      want += http_internal::ChunkWire("data: [DONE]\n\n") + "0\r\n\r\n";
      const std::string got = clients[static_cast<std::size_t>(i)]->ReadUntil(60);
      const std::size_t body = got.find("\r\n\r\n");
      ASSERT_NE(body, std::string::npos) << got.substr(0, 200);
      EXPECT_TRUE(got.substr(body + 4) == want)
          << threads << " threads, stream " << i << ": " << got.size() - body - 4
          << " bytes against " << want.size();
    }
    std::lock_guard<std::mutex> g(mu);
    streams.clear();
  }
}

// A writer keeps writing while the server stops: what is queued for the I/O
// thread and never ran goes with the server, and later writes do nothing
// (the sanitizer build runs this).
// A server with one stream open: its client, and the responder a writer
// writes through.
struct OneStream {
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<RawSocket> client;
  std::shared_ptr<Responder> out;
};

void OpenOneStream(OneStream* s) {
  HttpServerOptions o;
  o.port = 0;
  s->server = std::make_unique<HttpServer>(o);
  auto streaming = std::make_shared<std::promise<std::shared_ptr<Responder>>>();
  s->server->RouteAsync("GET", "/stream",
                        [streaming](const HttpRequest&, std::shared_ptr<Responder> out) {
                          out->StartStream(200, "text/event-stream");
                          streaming->set_value(std::move(out));
                        });
  ASSERT_TRUE(s->server->Start().ok());
  s->client = std::make_unique<RawSocket>(s->server->port());
  ASSERT_TRUE(s->client->Send(Get("/stream")));
  auto future = streaming->get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  s->out = future.get();
}

TEST(HttpLanes, StoppingWhileChunksAreQueued) {
  for (int round = 0; round < 5; ++round) {
    OneStream stream;
    ASSERT_NO_FATAL_FAILURE(OpenOneStream(&stream));
    auto& server = stream.server;
    const std::shared_ptr<Responder> out = stream.out;
    std::atomic<bool> done{false};
    std::atomic<int> written{0};
    std::thread writer([&] {
      for (int i = 0; !done; ++i) {
        out->Write("data: " + std::to_string(i) + "\n\n");
        written = i + 1;
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (written.load() < 1000 * (round + 1) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_GE(written.load(), 1000 * (round + 1));
    server.reset();
    done = true;
    writer.join();
    out->End();  // after the server: nothing
  }
}

// Chunks written inside a WakeBatch (as the engine client writes an engine
// step's outputs) wait until the batch ends, then go out together; a batch
// that outlives its server ends without touching it (the sanitizer build
// runs this).
TEST(HttpLanes, AWakeBatchHoldsItsChunksUntilItEnds) {
  OneStream stream;
  ASSERT_NO_FATAL_FAILURE(OpenOneStream(&stream));
  auto& server = stream.server;
  RawSocket& client = *stream.client;
  const std::shared_ptr<Responder> out = stream.out;
  // The header is out: nothing is queued for the I/O thread now.
  ASSERT_NE(client.ReadUntil(30, "\r\n\r\n").find("\r\n\r\n"), std::string::npos);
  {
    WakeBatch batch;
    out->Write("data: a\n\n");
    out->Write("data: b\n\n");
    EXPECT_EQ(client.ReadUntil(0.3), "");  // still in the lane's queue
  }
  const std::string want =
      http_internal::ChunkWire("data: a\n\n") + http_internal::ChunkWire("data: b\n\n");
  EXPECT_EQ(client.ReadUntil(30, want), want);
  {
    WakeBatch batch;
    out->Write("data: c\n\n");
    server.reset();  // stopped and gone inside the batch
  }
  out->End();  // after the server: nothing
}

// A chunk's buffer comes back once the chunk is written: a stream's later
// ChunkBuffer() calls hand out written chunks' buffers (empty, with their
// capacity), so that a streamed token costs no allocation; a buffer grown
// past the lane's limit is freed instead. The client reads each chunk as it
// was written, whatever buffer it was built in.
TEST(HttpLanes, WrittenChunksBuffersComeBack) {
  OneStream stream;
  ASSERT_NO_FATAL_FAILURE(OpenOneStream(&stream));
  RawSocket& client = *stream.client;
  const std::shared_ptr<Responder> out = stream.out;
  ASSERT_NE(client.ReadUntil(30, "\r\n\r\n").find("\r\n\r\n"), std::string::npos);
  // Each chunk is read before the next is written. Chunk i's buffer is put
  // back when the I/O thread's run that wrote it ends, handed to the
  // responder with chunk i + 2's Write, and out as chunk i + 3's buffer.
  const auto write_and_read = [&](int i, std::size_t size, std::size_t* capacity) {
    std::string chunk = out->ChunkBuffer();
    EXPECT_TRUE(chunk.empty()) << i;
    *capacity = chunk.capacity();
    chunk.reserve(size);
    chunk.assign("data: " + std::to_string(i) + std::string(size - 40, 'a' + i % 26) + "\n\n");
    const std::string want = http_internal::ChunkWire(chunk);
    out->Write(std::move(chunk));
    EXPECT_EQ(client.ReadUntil(30, want), want) << i;
  };
  int recycled = 0;
  std::size_t capacity = 0;
  for (int i = 0; i < 20; ++i) {
    write_and_read(i, 256, &capacity);
    if (capacity >= 256) ++recycled;
  }
  EXPECT_GE(recycled, 15);  // 17 when each run is its chunk's alone
  const std::size_t big = http_internal::LaneQueue::kMaxSpareBytes * 2;
  for (int i = 20; i < 26; ++i) write_and_read(i, big, &capacity);
  for (int i = 26; i < 40; ++i) {
    write_and_read(i, 256, &capacity);
    EXPECT_LT(capacity, big) << i;  // the big ones were freed
  }
  out->End();
}

}  // namespace http_lanes_test
}  // namespace sightline::api
