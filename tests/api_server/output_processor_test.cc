// OutputProcessor's named methods in process, without an engine process:
// engine outputs built as the engine sends them, a responder that records
// what would go out, and the request metrics read back from the registry.
// The wire format itself is stream_chunks_test.cc's and completions_test.cc's.
#include "output/output_processor.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "sightline/shm_registry/registry.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using nlohmann::json;

// What the HTTP layer would have been handed.
class RecordingResponder : public Responder {
 public:
  void Send(HttpResponse r) override {
    status = r.status;
    body = std::move(r.body);
    ++lasts;
  }
  void StartStream(int s, std::string, std::map<std::string, std::string>) override {
    status = s;
    started = true;
  }
  // Each chunk's buffer comes back as the next one's ChunkBuffer(), as the
  // HTTP layer's lanes recycle them: every stream here is rendered into
  // reused buffers.
  void Write(std::string chunk) override {
    stream += chunk;
    chunk.clear();
    spare = std::move(chunk);
  }
  std::string ChunkBuffer() override { return std::exchange(spare, std::string()); }
  void End(std::string last) override {
    stream += last;
    ++lasts;
  }
  void OnDisconnect(std::function<void()>) override {}

  int status = 0, lasts = 0;  // lasts: a body sent or a stream ended
  bool started = false;
  std::string body, stream, spare;
};

// One RequestOutput of `text` as byte tokens, as the engine sends it.
struct Output {
  flatbuffers::FlatBufferBuilder b;
  RequestDelta Build(const std::string& text, ipc::FinishReason finish = ipc::FinishReason::None) {
    return Ids(std::vector<std::int32_t>(text.begin(), text.end()), finish);
  }
  RequestDelta Ids(const std::vector<std::int32_t>& ids,
                   ipc::FinishReason finish = ipc::FinishReason::None) {
    b.Clear();
    const auto tokens = b.CreateVector(ids);
    ipc::RequestOutputBuilder o(b);
    o.add_new_token_ids(tokens);
    o.add_finish_reason(finish);
    b.Finish(o.Finish());
    return {++step, flatbuffers::GetRoot<ipc::RequestOutput>(b.GetBufferPointer())};
  }
  double step = 0;
};

class OutputProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "test", &registry_)
                    .ok());
    ASSERT_TRUE(RequestMetrics::Create(registry_.get(), "tiny", 4096, false, &metrics_).ok());
  }

  // Never started: its aborts are only queued.
  std::shared_ptr<OutputProcessor> Make(CompletionParams params) {
    OutputProcessor::Options o;
    o.id = "cmpl-test";
    o.model = "tiny";
    o.handler = "/v1/completions";
    params.prompts = {std::vector<std::int32_t>(4, 'a')};
    return std::make_shared<OutputProcessor>(std::move(o), std::move(params), tokenizer_.get(),
                                             &engine_, metrics_.get(), out_,
                                             [this] { ++completions_; });
  }
  double Sample(const std::string& key) {
    const auto page = sightline::testing::ParseSamples(
        registry_->Render(metrics::ExpositionFormat::kPrometheusText));
    const auto it = page.find(key);
    return it == page.end() ? 0 : it->second;  // series are made when first used
  }
  static std::string Key(const std::string& name, const std::string& extra = "") {
    return name + "{engine=\"0\"," + extra + "model_name=\"tiny\"}";
  }

  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<RequestMetrics> metrics_;
  std::unique_ptr<Tokenizer> tokenizer_ = MakeByteTokenizer();
  EngineClient engine_{EngineClient::Options{}};
  std::shared_ptr<RecordingResponder> out_ = std::make_shared<RecordingResponder>();
  int completions_ = 0;
};

TEST_F(OutputProcessorTest, StopStringAcrossTwoDeltasFinishesWithStopAndCountsTokensOnce) {
  CompletionParams params;
  params.stop = {"lo w"};
  auto p = Make(params);
  p->Start();
  Output output;
  p->OnOutput(0, output.Build("hello"));
  EXPECT_EQ(out_->lasts, 0);
  p->OnOutput(0, output.Build(" world"));  // the stop string ends the choice here
  ASSERT_EQ(out_->lasts, 1);
  EXPECT_EQ(completions_, 1);
  const json body = json::parse(out_->body);
  EXPECT_EQ(body["choices"][0]["text"], "hel");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 11);  // both deltas' tokens, as the engine made
  EXPECT_EQ(Sample(Key("vllm:generation_tokens_total")), 11);
  EXPECT_EQ(Sample(Key("vllm:request_success_total", "finished_reason=\"stop\",")), 1);
  EXPECT_EQ(Sample(Key("vllm:e2e_request_latency_seconds_count")), 1);
  // Later outputs and aborts of a complete request change nothing.
  p->OnOutput(0, output.Build("!", ipc::FinishReason::Length));
  p->Abort(/*client_gone=*/true);
  EXPECT_EQ(out_->lasts, 1);
  EXPECT_EQ(completions_, 1);
  EXPECT_EQ(Sample(Key("vllm:generation_tokens_total")), 11);
  EXPECT_EQ(Sample(Key("vllm:request_success_total", "finished_reason=\"abort\",")), 0);
}

// The request's DecodeOptions reach the detokenizer: skip_special_tokens
// false shows BOS's text. The stop token the engine ended on (EOS here)
// counts as generated but is not output, as in vLLM.
TEST_F(OutputProcessorTest, DecodeOptionsArePerRequestAndTheStopTokenIsNotOutput) {
  for (const bool skip : {true, false}) {
    CompletionParams params;
    params.decode.skip_special_tokens = skip;
    auto p = Make(params);
    p->Start();
    Output output;
    p->OnOutput(0, output.Ids({'h', 256, 'i'}));
    p->OnOutput(0, output.Ids({'!', 257}, ipc::FinishReason::Stop));
    ASSERT_EQ(out_->lasts, skip ? 1 : 2);
    const json body = json::parse(out_->body);
    EXPECT_EQ(body["choices"][0]["text"], skip ? "hi!" : "h<s>i!");
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  }
}

TEST_F(OutputProcessorTest, ChatStreamHasRolesWithTheFirstOutputAndOneChunkPerToken) {
  CompletionParams params;
  params.chat = true;
  params.stream = true;
  params.stop = {"xy"};  // "x" is held back (an empty chunk), then released by the flush
  auto p = Make(params);
  p->Start();
  EXPECT_TRUE(out_->started);
  EXPECT_EQ(out_->stream, "");  // no role chunk before the first output
  Output output;
  p->OnOutput(0, output.Build("ax"));
  p->OnOutput(0, output.Build("", ipc::FinishReason::Length));
  ASSERT_EQ(out_->lasts, 1);
  std::vector<json> chunks;
  std::string last;
  for (std::size_t at = 0; (at = out_->stream.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = out_->stream.find("\n\n", at);
    last = out_->stream.substr(at + 6, end - at - 6);
    if (last != "[DONE]") chunks.push_back(json::parse(last));
    at = end;
  }
  EXPECT_EQ(last, "[DONE]");
  ASSERT_EQ(chunks.size(), 5u);  // role, "a", "" (held back), "x" (flushed), closing
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["content"], "");
  EXPECT_EQ(chunks[3]["choices"][0]["delta"]["content"], "x");
  EXPECT_EQ(chunks[4]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(Sample("sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome="
                   "\"completed\"}"),
            1);
}

TEST_F(OutputProcessorTest, HangUpAbortsWithoutWritingAndIsCounted) {
  CompletionParams params;
  params.stream = true;
  params.n = 2;
  auto p = Make(params);
  p->Start();
  Output output;
  p->OnOutput(0, output.Build("ab"));
  const std::string before = out_->stream;
  p->Abort(/*client_gone=*/true);
  EXPECT_EQ(out_->stream, before);
  EXPECT_EQ(out_->lasts, 0);
  EXPECT_EQ(completions_, 1);
  EXPECT_EQ(Sample(Key("vllm:request_success_total", "finished_reason=\"abort\",")), 2);
  EXPECT_EQ(Sample("sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome="
                   "\"client_disconnected\"}"),
            1);
}

TEST_F(OutputProcessorTest, EngineGoneFailsTheStreamWithAnErrorEvent) {
  CompletionParams params;
  params.stream = true;
  auto p = Make(params);
  p->Start();
  p->OnOutput(0, RequestDelta{});  // no output: the engine is gone
  ASSERT_EQ(out_->lasts, 1);
  EXPECT_NE(out_->stream.find("\"code\":503"), std::string::npos) << out_->stream;
  EXPECT_EQ(out_->stream.find("[DONE]"), std::string::npos);
  // Counted as aborted: the engine's death ended it (an engine `error` is its verdict).
  EXPECT_EQ(Sample(Key("vllm:request_success_total", "finished_reason=\"abort\",")), 1);
  EXPECT_EQ(Sample(Key("vllm:request_success_total", "finished_reason=\"error\",")), 0);
  EXPECT_EQ(Sample("sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome="
                   "\"error_after_headers\"}"),
            1);
}

}  // namespace
}  // namespace sightline::api
