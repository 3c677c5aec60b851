// The API server's output path, per streamed token: an engine output holding
// one token -> OutputProcessor::OnOutput (event stamps, request metrics in
// the shared-memory registry, incremental detokenization, stop-string
// matching) -> the SSE chunk (JSON) OpenAiRenderer hands to the HTTP layer. The HTTP layer's socket
// write and the engine client's socket read are not included; see PERFORMANCE.md.
//
// Arguments: concurrent streams, API (0 completions, 1 chat, 2 responses),
// per-request metrics on/off, and logprobs (-1: none; k: the token's and k
// top logprobs in each output, shown in each chunk).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "admin_routes.h"
#include "bench_workload.h"
#include "http/http_protocol.h"
#include "http/http_server.h"
#include "output/output_processor.h"
#include "output/stop_matcher.h"
#include "sightline/shm_registry/registry.h"

// A counting allocator: every operator new in this program counts, so the
// benchmark reports the heap allocations one streamed token costs (issue 46:
// the per-token path should have none it can avoid).
namespace {
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace

// The replacements pair malloc with free, which GCC cannot see through.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

namespace sightline::api {
namespace {

// Counts what the HTTP layer would send. A written chunk's buffer comes
// back as the next ChunkBuffer(), as the lanes' recycling hands buffers
// back once streams are under way.
class CountingResponder : public Responder {
 public:
  void Send(HttpResponse r) override { bytes += r.body.size(); }
  void StartStream(int, std::string, std::map<std::string, std::string>) override {}
  void Write(std::string chunk) override {  // framed as the HTTP responder frames it
    http_internal::FrameChunk(&chunk);
    bytes += chunk.size();
    chunk.clear();
    spare_ = std::move(chunk);
  }
  std::string ChunkBuffer() override { return std::exchange(spare_, std::string()); }
  void End(std::string last) override { bytes += last.size(); }
  void OnDisconnect(std::function<void()>) override {}
  std::size_t bytes = 0;

 private:
  std::string spare_;
};

// A one-token RequestOutput as the engine sends it.
struct Output {
  flatbuffers::FlatBufferBuilder b;
  const ipc::RequestOutput* Build(const std::string& id, std::int32_t token, int logprobs = -1,
                                  ipc::FinishReason finish = ipc::FinishReason::None) {
    b.Clear();
    const auto id_off = b.CreateString(id);
    const auto tokens = b.CreateVector(std::vector<std::int32_t>{token});
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<ipc::TokenLogprobs>>> lp;
    if (logprobs >= 0) {
      std::vector<std::int32_t> top;
      std::vector<float> values;
      for (int i = 0; i < logprobs; ++i) {
        top.push_back('a' + i);
        values.push_back(-1.0f - static_cast<float>(i));
      }
      lp = b.CreateVector({ipc::CreateTokenLogprobsDirect(b, token, -1.5f, 2, &top, &values)});
    }
    ipc::RequestOutputBuilder o(b);
    o.add_request_id(id_off);
    o.add_new_token_ids(tokens);
    if (logprobs >= 0) o.add_logprobs(lp);
    o.add_finish_reason(finish);
    b.Finish(o.Finish());
    return flatbuffers::GetRoot<ipc::RequestOutput>(b.GetBufferPointer());
  }
};

// The request metrics an API server records into, in a registry of this
// benchmark's own; false (and the benchmark skipped) when either cannot be made.
struct BenchMetrics {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<RequestMetrics> metrics;
  bool Make(benchmark::State& state) {
    static int made = 0;
    const std::string instance =
        "apibench" + std::to_string(getpid()) + "-" + std::to_string(made++);
    if (!metrics::Registry::Create(instance, metrics::Capacity{}, "bench", &registry).ok()) {
      state.SkipWithError("no registry");
      return false;
    }
    if (!RequestMetrics::Create(registry.get(), "tiny", 4096, false, &metrics).ok()) {
      state.SkipWithError("no metrics");
      return false;
    }
    return true;
  }
};

void BM_StreamedToken(benchmark::State& state) {
  const auto streams = static_cast<std::size_t>(state.range(0));
  const auto api = state.range(1);
  const bool per_request = state.range(2) != 0;
  const int logprobs = static_cast<int>(state.range(3));
  BenchMetrics bench;
  if (!bench.Make(state)) return;
  RequestMetrics* const metrics = bench.metrics.get();
  const auto tokenizer = MakeByteTokenizer();
  const TokenTexts texts(tokenizer.get());  // the server's, shared by its requests
  auto responder = std::make_shared<CountingResponder>();

  std::vector<std::shared_ptr<OutputProcessor>> gens;
  std::vector<std::string> engine_ids;
  for (std::size_t i = 0; i < streams; ++i) {
    OutputProcessor::Options o;
    o.id = "cmpl-0-" + std::to_string(i);
    o.model = "tiny";
    o.per_request_metrics = per_request;
    o.token_texts = &texts;
    CompletionParams params;
    params.stream = true;
    params.chat = api != 0;
    params.responses = api == 2;
    params.stop = {"\x01never"};  // a stop string is checked on every token
    params.prompts = {std::vector<std::int32_t>(16, 'a')};
    params.logprobs = logprobs;
    engine_ids.push_back(o.id + "-0");
    // Never submitted, and the streams never end here: no engine is needed.
    gens.push_back(std::make_shared<OutputProcessor>(std::move(o), std::move(params),
                                                     tokenizer.get(), /*engine=*/nullptr, metrics,
                                                     responder, [] {}));
  }
  Output output;
  double step = 0;
  std::int32_t token = 'a';
  std::uint64_t allocations = 0;  // inside OnOutput only (not the engine output's building)
  for (auto _ : state) {
    step += 0.01;
    token = token == 'z' ? 'a' : token + 1;
    for (std::size_t i = 0; i < streams; ++i) {
      const RequestDelta d{step, output.Build(engine_ids[i], token, logprobs)};
      const std::uint64_t before = g_allocations.load(std::memory_order_relaxed);
      gens[i]->OnOutput(0, d);  // takes the request's lock, as from the engine client's thread
      allocations += g_allocations.load(std::memory_order_relaxed) - before;
    }
  }
  state.counters["allocs_per_token"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations() * streams);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * streams));
  state.counters["us_per_token"] = benchmark::Counter(
      static_cast<double>(state.iterations() * streams),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  benchmark::DoNotOptimize(responder->bytes);
}
BENCHMARK(BM_StreamedToken)
    ->ArgNames({"streams", "api", "per_request_metrics", "logprobs"})
    ->Args({256, 0, 0, -1})
    ->Args({256, 0, 1, -1})
    ->Args({256, 1, 0, -1})
    ->Args({256, 2, 0, -1})
    ->Args({1, 0, 0, -1})
    ->Args({256, 0, 0, 0})
    ->Args({256, 0, 0, 5})
    ->Args({256, 1, 0, 5})
    ->Args({256, 0, 0, 20})
    ->Unit(benchmark::kMillisecond);

// What a streamed request costs the output side once, whatever its length:
// its OutputProcessor made, a first token (the chunk templates are made
// then), and a last token with the finish (the closing chunk, usage, [DONE],
// the request's metrics). Allocations and µs per request, for issue 46's
// per-request share (about 100 µs of API-server CPU per request end to end).
void BM_StreamedRequest(benchmark::State& state) {
  const auto api = state.range(0);
  BenchMetrics bench;
  if (!bench.Make(state)) return;
  RequestMetrics* const metrics = bench.metrics.get();
  const auto tokenizer = MakeByteTokenizer();
  const TokenTexts texts(tokenizer.get());
  auto responder = std::make_shared<CountingResponder>();
  Output output;
  std::uint64_t allocations = 0, n = 0;
  for (auto _ : state) {
    const std::uint64_t before = g_allocations.load(std::memory_order_relaxed);
    OutputProcessor::Options o;
    o.id = "cmpl-0-" + std::to_string(n++);
    o.model = "tiny";
    o.token_texts = &texts;
    CompletionParams params;
    params.stream = true;
    params.chat = api != 0;
    params.prompts = {std::vector<std::int32_t>(16, 'a')};
    const std::string engine_id = o.id + "-0";
    auto gen = std::make_shared<OutputProcessor>(std::move(o), std::move(params), tokenizer.get(),
                                                 /*engine=*/nullptr, metrics, responder, [] {});
    gen->OnOutput(0, RequestDelta{0.01, output.Build(engine_id, 'a')});
    gen->OnOutput(0,
                  RequestDelta{0.02, output.Build(engine_id, 'b', -1, ipc::FinishReason::Length)});
    gen.reset();
    allocations += g_allocations.load(std::memory_order_relaxed) - before;
  }
  state.counters["allocs_per_request"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations());
  state.counters["us_per_request"] = benchmark::Counter(
      static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  benchmark::DoNotOptimize(responder->bytes);
}
BENCHMARK(BM_StreamedRequest)->ArgNames({"api"})->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The body of a request that does not stream, with logprobs: an echoed
// prompt of `tokens` entries, 5 top each (lm-eval's scoring requests).
// by_hand 0 puts the logprobs placeholder in the text, which sends the body
// through JSON values, the way every such body went before.
void BM_LogprobsBody(benchmark::State& state) {
  const auto tokens = static_cast<std::size_t>(state.range(0));
  const bool by_hand = state.range(1) != 0;
  std::vector<LogprobEntry> entries(tokens);
  for (std::size_t i = 0; i < tokens; ++i) {
    entries[i].token = static_cast<std::int32_t>(i);
    entries[i].text = " tok" + std::to_string(i % 300);
    entries[i].logprob = -0.01f * static_cast<float>(i % 500);
    for (int k = 0; k < 5; ++k)
      entries[i].top.push_back({k, " top" + std::to_string(k), -0.5f * static_cast<float>(k)});
  }
  entries[0].known = false;
  RenderOptions o;
  o.id = "cmpl-1";
  o.model = "tiny";
  o.logprobs = true;
  o.choices = 1;
  std::size_t bytes = 0;
  for (auto _ : state) {
    OpenAiRenderer renderer(o, std::make_shared<CountingResponder>());
    renderer.Echo(0, by_hand ? "a prompt" : EventTemplate::Placeholder(0), entries);
    renderer.EndChoice(0, "length");
    bytes += renderer.Finished(FinishedRequest{}, 0).body.body.size();
  }
  state.counters["us_per_token"] = benchmark::Counter(
      static_cast<double>(state.iterations() * tokens),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  benchmark::DoNotOptimize(bytes);
}
BENCHMARK(BM_LogprobsBody)->ArgNames({"tokens", "by_hand"})->Args({2048, 0})->Args({2048, 1});

// Stop-string matching for one streamed token (4 bytes of text), by number
// and length of stop strings. The stops share a 16-byte prefix with the text,
// so the automaton goes deep and holds text back, but never matches: the
// steady state of a long stream. Per-token cost should not depend on either.
void BM_StopMatcherToken(benchmark::State& state) {
  const auto num = static_cast<std::size_t>(state.range(0));
  const auto len = static_cast<std::size_t>(state.range(1));
  std::vector<std::string> stops;
  for (std::size_t i = 0; i < num; ++i) {
    std::string s = "quick brown fox " + std::to_string(i) + " ";
    s.resize(std::max(len, s.size()), 'z');
    stops.push_back(std::move(s));
  }
  StopMatcher matcher(stops);
  const std::string_view text = "the quick brown fox jumps over the lazy dog ";  // 44 bytes
  std::size_t at = 0, released = 0;
  for (auto _ : state) {
    released += matcher.Feed(text.substr(at, 4)).text.size();
    at = (at + 4) % text.size();
  }
  benchmark::DoNotOptimize(released);
}
BENCHMARK(BM_StopMatcherToken)
    ->ArgNames({"stops", "len"})
    ->Args({1, 16})
    ->Args({64, 16})
    ->Args({64, 1024})
    ->Args({10000, 16})
    ->Args({100000, 16});

// Compiling a request's stop strings, once per request (shared by its n choices).
void BM_StopStringsCompile(benchmark::State& state) {
  std::vector<std::string> stops;
  for (std::int64_t i = 0; i < state.range(0); ++i)
    stops.push_back("quick brown fox " + std::to_string(i) + " ");
  for (auto _ : state) benchmark::DoNotOptimize(StopStrings::Compile(stops));
}
BENCHMARK(BM_StopStringsCompile)->Arg(64)->Arg(100000)->Unit(benchmark::kMicrosecond);

// A registry of this benchmark's own holding the full catalogue, as one
// process wrote it; null (and the benchmark skipped) if it cannot be made.
std::unique_ptr<metrics::Registry> CatalogueRegistry(benchmark::State& state) {
  static int made = 0;
  std::unique_ptr<metrics::Registry> registry;
  const std::string instance =
      "apibench-page" + std::to_string(getpid()) + "-" + std::to_string(made++);
  if (!metrics::Registry::Create(instance, metrics::Capacity{}, "bench", &registry).ok() ||
      !bench::RegisterCatalogue(registry.get(), bench::WorkloadOptions()).ok()) {
    state.SkipWithError("no registry");
    return nullptr;
  }
  bench::WriteWorkload(registry.get(), 3);
  return registry;
}

// The /metrics answer as the control thread makes it (MetricsResponse: the
// page rendered, then compressed when the scraper asks for gzip), on the full
// catalogue one process wrote (bench_workload.h). Prometheus asks for
// OpenMetrics and gzip by default.
void BM_MetricsAnswer(benchmark::State& state) {
  const bool gzip = state.range(0) != 0;
  const std::unique_ptr<metrics::Registry> registry = CatalogueRegistry(state);
  if (!registry) return;
  HttpRequest request;
  request.headers["accept"] = "application/openmetrics-text;version=1.0.0";
  if (gzip) request.headers["accept-encoding"] = "gzip";
  std::size_t bytes = 0;
  for (auto _ : state) {
    HttpResponse r = MetricsResponse(registry.get(), request, "");
    bytes = r.body.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["answer_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsAnswer)->ArgName("gzip")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Gzip alone on that page, at igzip's levels 0-3 (/metrics uses 1).
void BM_MetricsGzip(benchmark::State& state) {
  const std::unique_ptr<metrics::Registry> registry = CatalogueRegistry(state);
  if (!registry) return;
  const std::string page = registry->Render(metrics::ExpositionFormat::kOpenMetrics);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string z = Gzip(page, static_cast<int>(state.range(0)));
    bytes = z.size();
    benchmark::DoNotOptimize(z);
  }
  state.counters["page_bytes"] = static_cast<double>(page.size());
  state.counters["gzip_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsGzip)->ArgName("level")->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sightline::api

BENCHMARK_MAIN();
