// libFuzzer target over the whole in-process HTTP path: raw bytes on a
// loopback connection -> Beast parser -> router -> body validation ->
// handlers -> error/response rendering, against a real HttpServer +
// OpenAiServer + RequestMetrics whose engine is a FakeEngine at the IPC
// boundary (so completions really complete).
//
// Input format: the first byte picks the mode and the server.
//   bit 0 clear: the rest is written to the socket as it is (any framing);
//   bit 0 set:   a well-framed request: byte 1 picks the route, byte 2 holds
//                flags (see Flag), the rest is the body, so body validation
//                is reached often;
//   bit 1 clear: the server with --api-key (kApiKey); set: the one without.
// Both servers share one OpenAiServer, engine client and registry.
//
// What counts as a failure (abort(), so libFuzzer reports the input):
//   * no response and no close within kBound after a complete request (a
//     hang), or after an incomplete one once the client half-closed;
//   * a malformed or truncated response (misframing);
//   * a JSON error body that does not parse or lacks error.message, a JSON
//     body or an SSE data line that does not parse;
//   * a chunked response to an HTTP/1.0 request (RFC 9112 §7.1), a 401
//     without WWW-Authenticate: Bearer (RFC 9110 §11.6.1);
//   * every kCheckEvery inputs: /health not 200, or a known completion not
//     answered with its own tokens;
//   * with SIGHTLINE_FUZZ_STRICT=1 also any 500 (an exception escaped a
//     handler: a field not validated).
// Crashes (ASan, UBSan, std::terminate) are reported by libFuzzer itself.
//
// Run by hand: http_fuzzer -dict=tests/fuzz/http.dict NEW_DIR tests/fuzz/corpus
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "admin_routes.h"
#include "engine_router.h"
#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "openai_server.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/tokenizer/tokenizer.h"
#include "support/fake_engine.h"

namespace {

namespace http = boost::beast::http;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kBound = std::chrono::seconds(30);  // generous: ASan, a loaded 2-core machine
constexpr int kCheckEvery = 64;
constexpr std::size_t kMaxBody = 1u << 20;
const char* const kApiKey = "fuzz-key";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "==http_fuzzer== FAILURE: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A hang: every thread's stack first (gdb, when installed), to show where.
std::string HangState();  // what the fake engine and the server say

[[noreturn]] void FailHang(const std::string& what) {
  std::fprintf(stderr, "==http_fuzzer== HANG: %s\n", what.c_str());
  std::fprintf(stderr, "==http_fuzzer== %s\n", HangState().c_str());
  if (access("/usr/bin/gdb", X_OK) == 0) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Yama: let the child attach
    const std::string cmd = "/usr/bin/gdb -p " + std::to_string(getpid()) +
                            " -batch -nx -ex 'thread apply all bt 25' 1>&2 2>/dev/null";
    (void)!std::system(cmd.c_str());
  }
  Fail(what);
}

// The server under test and its collaborators, torn down in order at exit.
struct Instance {
  std::unique_ptr<sightline::metrics::Registry> registry;
  std::unique_ptr<sightline::Tokenizer> tokenizer;
  std::unique_ptr<sightline::testing::FakeEngine> engine;
  std::unique_ptr<sightline::api::EngineRouter> client;
  std::unique_ptr<sightline::api::RequestMetrics> metrics;
  std::unique_ptr<sightline::api::HttpServer> keyed, open;  // with and without --api-key
  std::unique_ptr<sightline::api::OpenAiServer> openai;
  std::map<int, std::uint64_t> statuses;  // status -> count (0: closed without one)
  std::uint64_t inputs = 0;

  ~Instance() {
    for (auto* s : {keyed.get(), open.get()})
      if (s) s->Stop();          // no handler runs after this
    if (client) client->Stop();  // no engine output either
  }
};
Instance* g = nullptr;

void Setup() {
  namespace api = sightline::api;
  auto inst = std::make_unique<Instance>();
  const std::string name = "fuzz-" + std::to_string(getpid());
  if (!sightline::metrics::Registry::Create(name, sightline::metrics::Capacity{}, "api-server-0",
                                            &inst->registry)
           .ok())
    Fail("cannot create the registry " + name);
  // Unlinked at once: this process keeps its mapping, and a crash leaves nothing in /dev/shm.
  (void)sightline::metrics::Registry::Remove(name);
  inst->tokenizer = sightline::MakeByteTokenizer();
  sightline::testing::FakeEngine::Options fo;
  fo.input_address = "ipc://@sightline-" + name + ".in";  // abstract: no file to clean up
  fo.output_address = "ipc://@sightline-" + name + ".out";
  inst->engine = std::make_unique<sightline::testing::FakeEngine>(fo);
  api::EngineClient::Options eo;
  eo.input_address = fo.input_address;
  eo.output_address = fo.output_address;
  eo.ready_timeout_s = 30;
  api::EngineRouter::Options ro;
  ro.engines.push_back(eo);
  inst->client = std::make_unique<api::EngineRouter>(std::move(ro));
  api::EngineInfo info;
  if (sightline::Status s = inst->client->Start(&info); !s.ok()) Fail(s.message());
  api::OpenAiServerOptions so;
  so.served_model_name = "tiny";
  so.engine = info;
  so.per_request_metrics = true;
  so.load_tracking = true;
  if (!api::RequestMetrics::Create(inst->registry.get(), so.served_model_name, info.max_model_len,
                                   false, &inst->metrics)
           .ok())
    Fail("cannot register the request metrics");
  inst->openai = std::make_unique<api::OpenAiServer>(so, inst->client.get(), inst->tokenizer.get(),
                                                     inst->metrics.get());
  api::EngineRouter* client = inst->client.get();
  for (const char* key : {kApiKey, ""}) {
    api::HttpServerOptions ho;
    ho.port = 0;
    // SIGHTLINE_FUZZ_HTTP_THREADS: to tell a race between threads from others.
    const char* threads = std::getenv("SIGHTLINE_FUZZ_HTTP_THREADS");
    ho.threads = threads ? std::atoi(threads) : 2;
    ho.max_body_bytes = kMaxBody;
    ho.api_key = key;
    ho.on_exchange = [m = inst->metrics.get()](const api::HttpExchange& e) { m->OnHttp(e); };
    auto server = std::make_unique<api::HttpServer>(ho);
    api::AddAdminRoutes(server.get(), inst->registry.get(), [client] { return client->healthy(); });
    inst->openai->AddRoutes(server.get());
    if (sightline::Status s = server->Start(); !s.ok()) Fail(s.message());
    (*key ? inst->keyed : inst->open) = std::move(server);
  }
  g = inst.release();
  std::atexit([] {
    std::fprintf(stderr, "==http_fuzzer== %llu inputs; responses by status:",
                 static_cast<unsigned long long>(g->inputs));
    for (const auto& [status, count] : g->statuses)
      std::fprintf(stderr, " %d:%llu", status, static_cast<unsigned long long>(count));
    std::fprintf(stderr, " (0: closed without a response)\n");
    delete g;
    g = nullptr;
  });
}

// --- the request ---------------------------------------------------------------

struct Route {
  const char* method;
  const char* target;
};
constexpr Route kRoutes[] = {
    {"POST", "/v1/completions"},
    {"POST", "/v1/chat/completions"},
    {"POST", "/v1/responses"},
    {"POST", "/tokenize"},
    {"POST", "/detokenize"},
    {"GET", "/v1/models"},
    {"GET", "/health"},
    {"GET", "/metrics"},
    {"GET", "/ping"},
    {"POST", "/ping"},
    {"GET", "/version"},
    {"GET", "/load"},
    {"HEAD", "/health"},
    {"OPTIONS", "/v1/completions"},
    {"POST", "/v1/completions?x=1"},
    {"POST", "http://a/v1/chat/completions"},
};

enum Flag : std::uint8_t {
  kHttp10 = 1,
  kChunked = 2,
  kExpectContinue = 4,
  kConnectionClose = 8,
  kNoAuth = 16,
  kGzip = 32,
  kOpenMetrics = 64,
  kLowerCaseBearer = 128,
};

std::string WellFramed(const std::uint8_t* data, std::size_t size) {
  const Route& route = kRoutes[(size > 0 ? data[0] : 0) % std::size(kRoutes)];
  const std::uint8_t flags = size > 1 ? data[1] : 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + std::min<std::size_t>(size, 2),
                              size - std::min<std::size_t>(size, 2));
  std::string r = std::string(route.method) + " " + route.target +
                  (flags & kHttp10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n") + "Host: 127.0.0.1\r\n";
  if (!(flags & kNoAuth))
    r += std::string("Authorization: ") + (flags & kLowerCaseBearer ? "bearer " : "Bearer ") +
         kApiKey + "\r\n";
  if (flags & kExpectContinue) r += "Expect: 100-continue\r\n";
  if (flags & kConnectionClose) r += "Connection: close\r\n";
  if (flags & kGzip) r += "Accept-Encoding: gzip\r\n";
  if (flags & kOpenMetrics) r += "Accept: application/openmetrics-text; version=1.0.0\r\n";
  if (std::string_view(route.method) == "POST") r += "Content-Type: application/json\r\n";
  if (flags & kChunked) {
    // Two chunks, split in the middle: a body that arrives in pieces.
    const std::size_t half = body.size() / 2;
    char line[32];
    r += "Transfer-Encoding: chunked\r\n\r\n";
    for (std::string_view piece : {body.substr(0, half), body.substr(half)}) {
      if (piece.empty()) continue;
      std::snprintf(line, sizeof line, "%zx\r\n", piece.size());
      r.append(line).append(piece).append("\r\n");
    }
    r += "0\r\n\r\n";
  } else {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    r.append(body);
  }
  return r;
}

// What the server will make of `wire`, judged by the same Beast parser it
// uses: a whole first request, which it must answer however long the client
// keeps the connection open; or not (an error, or more bytes needed), which
// it may answer at once or only at the client's end of input: Beast finds
// some errors only once the header is complete, so how the bytes arrive
// decides (the whole buffer shows a bad field value, 1 KiB reads wait for
// the header's end).
struct Judged {
  bool complete = false;  // a whole first request
  bool head = false;      // the first request is a HEAD: its response has no body
  unsigned version = 11;  // of the first request, once its header parsed
};
Judged Judge(const std::string& wire) {
  http::request_parser<http::string_body> p;
  p.body_limit(kMaxBody);
  p.eager(true);
  Judged j;
  std::size_t off = 0;
  for (;;) {
    boost::beast::error_code ec;
    const std::size_t used = p.put(boost::asio::buffer(wire.data() + off, wire.size() - off), ec);
    off += used;
    if (p.is_header_done()) {
      j.head = p.get().method() == http::verb::head;
      j.version = p.get().version();
    }
    if ((!ec || ec == http::error::need_more) && !p.is_done() && used > 0 && off < wire.size())
      continue;
    j.complete = !ec && p.is_done();
    return j;
  }
}

// --- the connection and the response -------------------------------------------

class Connection {
 public:
  explicit Connection(int port) {
    if (!TryConnect(port))
      Fail(std::string("cannot connect to the server: ") + std::strerror(errno));
    const int one = 1;
    // Closed with a reset: no TIME_WAIT, so thousands of inputs a minute
    // never run out of ephemeral ports.
    const linger reset{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() { close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Writes what the server will read; a server that stopped reading (it
  // answered early and closed) ends the write.
  //
  // Every call retries on EINTR: libFuzzer's -timeout arms an interval timer
  // whose SIGALRM (first after timeout/2 + 1 s) interrupts whatever this
  // thread is blocked in. Taken for a timeout, it cut a write short (the
  // server then waited for the rest until its read deadline) or ended a
  // wait for an answer already on its way: both were reported as hangs.
  void Write(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      pollfd p{fd_, POLLOUT, 0};
      const int ready = poll(&p, 1, 1000);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return;
      const ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }
  void HalfClose() { shutdown(fd_, SHUT_WR); }

  // Receives into buffer_ until `deadline`; false at EOF, reset or deadline
  // (*timed_out says which).
  bool Receive(Clock::time_point deadline, bool* timed_out) {
    *timed_out = false;
    for (;;) {  // EINTR: see Write
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      const int ready = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        *timed_out = true;
        return false;
      }
      break;
    }
    char chunk[16384];
    ssize_t n;
    do n = recv(fd_, chunk, sizeof chunk, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  std::string& buffer() { return buffer_; }

 private:
  // A socket from a new loopback address each time (127.1.0.0/16): the
  // server closes first, so each connection leaves a TIME-WAIT on its side
  // for a minute, and a thousand connections a second from one address would
  // soon reuse a 4-tuple still in it (connect fails, or a SYN meets the old
  // connection and the request is lost: false hangs). Whether it connected;
  // errno says why not.
  bool TryConnect(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    static std::uint32_t next_source = 0;
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(0x7f010000u | (next_source++ & 0xffffu));
    const int one = 1;
    setsockopt(fd_, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    (void)bind(fd_, reinterpret_cast<sockaddr*>(&source), sizeof source);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return true;
    if (errno != EINTR) return false;
    // Interrupted (libFuzzer's SIGALRM, see Write): the handshake goes on
    // without us; wait for it and take its outcome. Taken for a failure, this
    // was the fuzzer's "cannot connect to the server" under load.
    for (;;) {
      pollfd p{fd_, POLLOUT, 0};
      const int ready = poll(&p, 1, 10000);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) errno = ETIMEDOUT;
      if (ready <= 0) return false;
      int error = 0;
      socklen_t length = sizeof error;
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return false;
      errno = error;
      return error == 0;
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

struct Response {
  bool arrived = false;  // false: the server closed without answering
  int status = 0;
  bool chunked = false;
  std::string content_type, www_authenticate, body;
};

// Reads the first final (non-1xx) response, or a clean close, within kBound.
Response ReadResponse(Connection& c, bool head, const std::string& context) {
  const auto deadline = Clock::now() + kBound;
  std::size_t off = 0;
  for (;;) {
    http::response_parser<http::string_body> p;
    p.body_limit(boost::none);
    p.eager(true);
    p.skip(head);
    bool started = false;
    for (;;) {
      boost::beast::error_code ec;
      std::size_t used = 0;
      if (off < c.buffer().size()) {
        started = true;
        used = p.put(boost::asio::buffer(c.buffer().data() + off, c.buffer().size() - off), ec);
        off += used;
        if (ec && ec != http::error::need_more)
          Fail("malformed response (" + ec.message() + ") to " + context);
      }
      if (p.is_done()) break;
      if (!ec && used > 0 && off < c.buffer().size()) continue;  // parse on
      bool timed_out = false;
      if (c.Receive(deadline, &timed_out)) continue;
      if (timed_out) FailHang("no response and no close within the bound for " + context);
      if (!started) return {};  // closed without a response: allowed
      p.put_eof(ec);            // a close-delimited body ends here
      if (ec) Fail("truncated response (" + ec.message() + ") to " + context);
      break;
    }
    const auto& m = p.get();
    if (m.result_int() >= 100 && m.result_int() < 200) continue;  // 100 Continue: read on
    Response r;
    r.arrived = true;
    r.status = m.result_int();
    r.chunked = m.chunked();
    r.content_type = std::string(m[http::field::content_type]);
    r.www_authenticate = std::string(m[http::field::www_authenticate]);
    r.body = m.body();
    return r;
  }
}

// The rendering checks every response must pass.
void CheckRendering(const Response& r, const Judged& request, const std::string& context) {
  if (!r.arrived) return;
  if (r.status < 100 || r.status > 599) Fail("status " + std::to_string(r.status));
  if (request.version < 11 && r.chunked)
    Fail("a chunked response to an HTTP/1.0 request: " + context);
  if (r.status == 401 && !(r.www_authenticate.size() >= 6 &&
                           strncasecmp(r.www_authenticate.c_str(), "Bearer", 6) == 0))
    Fail("a 401 without WWW-Authenticate: Bearer, to " + context);
  if (request.head) return;
  if (r.content_type.starts_with("application/json") && (r.status >= 400 || !r.body.empty())) {
    const json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded()) Fail("a JSON body that does not parse, to " + context + ": " + r.body);
    if (r.status >= 400 && !(j.is_object() && j.contains("error") && j["error"].is_object() &&
                             j["error"].contains("message") && j["error"]["message"].is_string()))
      Fail("an error body without error.message, to " + context + ": " + r.body);
  }
  if (r.content_type.starts_with("text/event-stream")) {
    for (std::size_t at = 0; (at = r.body.find("data: ", at)) != std::string::npos;) {
      const std::size_t end = r.body.find('\n', at);
      if (at > 0 && r.body[at - 1] != '\n') {  // not a field at a line start
        at = end;
        continue;
      }
      const std::string payload = r.body.substr(at + 6, end - at - 6);
      if (payload != "[DONE]" && json::parse(payload, nullptr, false).is_discarded())
        Fail("an SSE event that does not parse, to " + context + ": " + payload);
      at = end;
    }
  }
  if (r.status == 500 && std::getenv("SIGHTLINE_FUZZ_STRICT"))
    Fail("500 (an exception escaped a handler?) to " + context + ": " + r.body);
}

std::string Printable(const std::string& wire) {
  std::string out;
  for (char ch : wire.substr(0, 300)) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) {
      out += ch;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}

Response Exchange(const std::string& wire, bool keyed) {
  const Judged judged = Judge(wire);
  const std::string context = Printable(wire);
  Connection c((keyed ? g->keyed : g->open)->port());
  c.Write(wire);
  // Anything but a whole request: the client is done, so the server must
  // answer (400) or close once it reads the end.
  if (!judged.complete) c.HalfClose();
  Response r = ReadResponse(c, judged.head, context);
  CheckRendering(r, judged, context);
  return r;
}

std::string HangState() {
  static bool asking = false;  // a hang while asking: do not ask again
  const auto& e = *g->engine;
  std::string state = "fake engine: " + std::to_string(e.requests_added()) + " requests added, " +
                      std::to_string(e.requests_finished()) + " finished, " +
                      std::to_string(e.requests_aborted()) + " aborted, " +
                      std::to_string(e.requests_running()) + " running; GET /load: ";
  if (asking) return state + "(hangs too)";
  // The sockets: a listener's Recv-Q above 0 is connections nobody
  // accepted; a connection's, bytes nobody read.
  const std::string ss = "ss -tan state all '( sport = :" + std::to_string(g->keyed->port()) +
                         " or sport = :" + std::to_string(g->open->port()) +
                         " or dport = :" + std::to_string(g->keyed->port()) +
                         " or dport = :" + std::to_string(g->open->port()) +
                         " )' | grep -v TIME-WAIT 1>&2";
  (void)!std::system(ss.c_str());
  asking = true;
  state += Exchange("GET /load HTTP/1.1\r\nHost: a\r\n\r\n", false).body;
  asking = false;
  return state;
}

// The instance still works: /health, and a completion that gets its own tokens.
void CheckAlive() {
  for (bool keyed : {true, false}) {
    const Response h = Exchange("GET /health HTTP/1.1\r\nHost: a\r\n\r\n", keyed);
    if (h.status != 200) Fail("/health answered " + std::to_string(h.status) + ": " + h.body);
  }
  const std::string body = R"({"model":"tiny","prompt":"zq","max_tokens":3,"temperature":0})";
  const Response c = Exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + std::string(kApiKey) +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
      true);
  if (c.status != 200)
    Fail("a plain completion answered " + std::to_string(c.status) + ": " + c.body);
  const json j = json::parse(c.body, nullptr, false);
  std::string text;
  if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
      j["choices"][0].is_object() && j["choices"][0].contains("text") &&
      j["choices"][0]["text"].is_string())
    text = j["choices"][0]["text"].get<std::string>();
  // The fake engine echoes the prompt's tokens: anything else is another request's.
  if (text.empty() || text.find_first_not_of("zq") != std::string::npos)
    Fail("a completion of \"zq\" got someone else's text: " + c.body);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  signal(SIGPIPE, SIG_IGN);
  Setup();
  CheckAlive();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string wire = data[0] & 1
                               ? WellFramed(data + 1, size - 1)
                               : std::string(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Response r = Exchange(wire, !(data[0] & 2));
  ++g->statuses[r.arrived ? r.status : 0];
  if (++g->inputs % kCheckEvery == 0) CheckAlive();
  return 0;
}
