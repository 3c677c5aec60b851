// The parts of `sightline bench serve` for benchmarking speculative
// decoding: the copy workload (prompts that repeat one span, so the output
// can be drafted from the prompt), and the run's drafts and acceptance read
// back from two /metrics pages into the report.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sightline/loadgen/exposition.h"
#include "sightline/loadgen/report.h"
#include "sightline/loadgen/spec_decode.h"
#include "sightline/loadgen/workload.h"

namespace sightline::loadgen {
namespace {

TEST(Workload, CopyPromptsRepeatOneSpanBackToBack) {
  CopyOptions o;
  o.span_len = 16;
  o.repeats = 5;
  o.output_len = 7;
  o.seed = 3;
  const auto w = CopyWorkload(o, 20);
  ASSERT_EQ(w.size(), 20u);
  for (const auto& r : w) {
    ASSERT_EQ(r.prompt_ids.size(), 80u);
    EXPECT_TRUE(r.prompt_text.empty());
    EXPECT_EQ(r.max_tokens, 7u);
    for (std::size_t i = 16; i < r.prompt_ids.size(); ++i) {
      ASSERT_EQ(r.prompt_ids[i], r.prompt_ids[i % 16]) << i;
    }
    for (auto id : r.prompt_ids) {
      ASSERT_TRUE(id >= 32 && id < 127);
    }
    // A random span, not a run of one token that repeats trivially.
    std::set<std::uint32_t> distinct(r.prompt_ids.begin(), r.prompt_ids.begin() + 16);
    EXPECT_GT(distinct.size(), 4u);
  }
  // Every prompt has its own span: no prefix shared across prompts.
  EXPECT_NE(std::vector<std::uint32_t>(w[0].prompt_ids.begin(), w[0].prompt_ids.begin() + 16),
            std::vector<std::uint32_t>(w[1].prompt_ids.begin(), w[1].prompt_ids.begin() + 16));

  // Seeded: the same prompts again, others under another seed.
  const auto again = CopyWorkload(o, 20);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(again[i].prompt_ids, w[i].prompt_ids) << i;
  }
  o.seed = 4;
  EXPECT_NE(CopyWorkload(o, 1)[0].prompt_ids, w[0].prompt_ids);

  // Text (chat): the same prompts' bytes.
  o.seed = 3;
  o.text = true;
  const auto text = CopyWorkload(o, 20);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_TRUE(text[i].prompt_ids.empty());
    EXPECT_EQ(text[i].prompt_text, std::string(w[i].prompt_ids.begin(), w[i].prompt_ids.end()));
  }

  // One copy: the same lengths with nothing to draft from, a baseline.
  o.text = false;
  o.repeats = 1;
  EXPECT_EQ(CopyWorkload(o, 1)[0].prompt_ids.size(), 16u);
}

TEST(Workload, CopyOptionsRejectEmptyLengthsAndOverlongPrompts) {
  const CopyOptions defaults;
  EXPECT_EQ(defaults.span_len, 64u);
  EXPECT_EQ(defaults.repeats, 4u);
  EXPECT_EQ(defaults.output_len, 128u);
  EXPECT_TRUE(CheckCopyOptions(defaults).ok());
  CopyOptions o;
  o.span_len = 0;
  EXPECT_EQ(CheckCopyOptions(o).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckCopyOptions(o).message(), "--copy-span-len must be at least 1");
  o = {};
  o.repeats = 0;
  EXPECT_EQ(CheckCopyOptions(o).message(), "--copy-repeats must be at least 1");
  o = {};
  o.output_len = 0;
  EXPECT_EQ(CheckCopyOptions(o).message(), "--copy-output-len must be at least 1");
  o = {};
  o.span_len = 1000;
  o.repeats = 1000;  // exactly the limit
  EXPECT_TRUE(CheckCopyOptions(o).ok());
  o.span_len = 1001;
  EXPECT_NE(CheckCopyOptions(o).message().find("at most 1000000 tokens"), std::string::npos);
  // Products that would wrap in 32 bits (to 0, and to 1) are still refused.
  o.span_len = o.repeats = 65536;
  EXPECT_FALSE(CheckCopyOptions(o).ok());
  o.span_len = o.repeats = std::numeric_limits<std::uint32_t>::max();
  EXPECT_FALSE(CheckCopyOptions(o).ok());
}

std::vector<Sample> Parse(const std::string& page) {
  std::vector<Sample> s;
  EXPECT_TRUE(ParseExposition(page, &s).ok()) << page;
  return s;
}

// Two engines' series on each page, as `sightline serve` with two engines
// (or vLLM with data parallelism) exposes them.
const char kBefore[] = R"(# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 40
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 20
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 30
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 6
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9
vllm:generation_tokens_total{engine="0",model_name="m"} 100
)";
const char kAfter[] = R"(# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 60
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 55
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 240
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 220
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 180
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 156
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 99
vllm:generation_tokens_total{engine="0",model_name="m"} 900
)";

TEST(SpecDecode, DeltasSumEverySeriesAndGiveTheRatios) {
  const auto s = SpecDecodeDelta(Parse(kBefore), Parse(kAfter));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->drafts, 100);           // (60 - 10) + (55 - 5)
  EXPECT_EQ(s->draft_tokens, 400);     // (240 - 40) + (220 - 20)
  EXPECT_EQ(s->accepted_tokens, 300);  // (180 - 30) + (156 - 6); per_pos not mixed in
  EXPECT_DOUBLE_EQ(s->acceptance_rate, 0.75);
  EXPECT_DOUBLE_EQ(s->mean_acceptance_length, 4.0);  // 1 + 300 / 100
  // Series that first appear after the run started count from 0.
  const auto fresh = SpecDecodeDelta({}, Parse(kAfter));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->drafts, 115);
  EXPECT_DOUBLE_EQ(fresh->acceptance_rate, 336.0 / 460);
}

TEST(SpecDecode, NothingWithoutTheCountersOrAcrossARestart) {
  // A server without speculation: its page lacks the families.
  EXPECT_FALSE(SpecDecodeDelta(Parse(kBefore), Parse("vllm:generation_tokens_total 5\n")));
  EXPECT_FALSE(SpecDecodeDelta({}, {}));
  // One of the three missing is as good as none.
  std::vector<Sample> partial = Parse(kAfter);
  std::erase_if(partial, [](const Sample& s) { return s.name == kSpecDraftTokens; });
  EXPECT_FALSE(SpecDecodeDelta(Parse(kBefore), partial));
  // Counters that went down: the server restarted in between.
  EXPECT_FALSE(SpecDecodeDelta(Parse(kAfter), Parse(kBefore)));
  // Present but nothing drafted during the run: counts of 0, no ratios.
  const auto idle = SpecDecodeDelta(Parse(kBefore), Parse(kBefore));
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->drafts, 0);
  EXPECT_TRUE(std::isnan(idle->acceptance_rate));
  EXPECT_TRUE(std::isnan(idle->mean_acceptance_length));
}

TEST(SpecDecode, TheReportShowsTheRunsDraftsOnlyWhenThereAreCounters) {
  RunInfo info;
  info.dataset = "copy";
  info.num_prompts = 4;
  const RunStats stats;
  const std::string plain = FormatReport(info, stats);
  EXPECT_EQ(plain.find("Speculative"), std::string::npos) << plain;
  const nlohmann::json plain_json = JsonReport(info, stats, nullptr);
  EXPECT_FALSE(plain_json.contains("spec_decode"));

  const auto spec = SpecDecodeDelta(Parse(kBefore), Parse(kAfter));
  ASSERT_TRUE(spec.has_value());
  const std::string text = FormatReport(info, stats, &*spec);
  EXPECT_NE(text.find("-------------- Speculative Decoding --------------\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Draft tokens:                                     400\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Acceptance rate (%):                            75.00\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Mean acceptance length:                          4.00\n"), std::string::npos)
      << text;
  const nlohmann::json j = JsonReport(info, stats, nullptr, &*spec)["spec_decode"];
  EXPECT_EQ(j["drafts"], 100);
  EXPECT_EQ(j["draft_tokens"], 400);
  EXPECT_EQ(j["accepted_tokens"], 300);
  EXPECT_EQ(j["acceptance_rate"], 0.75);
  EXPECT_EQ(j["mean_acceptance_length"], 4.0);

  const auto idle = SpecDecodeDelta(Parse(kBefore), Parse(kBefore));
  ASSERT_TRUE(idle.has_value());
  const std::string idle_text = FormatReport(info, stats, &*idle);
  EXPECT_NE(idle_text.find("Acceptance rate (%):                              n/a\n"),
            std::string::npos)
      << idle_text;
  EXPECT_EQ(idle_text.find("nan"), std::string::npos) << idle_text;
  const nlohmann::json idle_json = JsonReport(info, stats, nullptr, &*idle)["spec_decode"];
  EXPECT_EQ(idle_json["drafts"], 0);
  EXPECT_TRUE(idle_json["acceptance_rate"].is_null());
  EXPECT_TRUE(idle_json["mean_acceptance_length"].is_null());
}

}  // namespace
}  // namespace sightline::loadgen
