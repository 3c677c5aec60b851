// EngineRouter: vLLM's balancer score and scan, the X-data-parallel-rank
// header's parse (against a reference over a generated corpus), and a router
// over two fake engines: the local bump between EngineLoads, a fresh
// EngineLoad replacing the guess, a pinned place, and engines that disagree
// refused at start-up.
#include "engine_router.h"

#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <thread>

#include "support/fake_engine.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using sightline::testing::FakeEngine;

// Polls `done` every 10 ms for up to 30 s (what a fake engine sends arrives
// on the client's thread a moment later); whether it came true.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 3000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST(LeastLoaded, TakesTheLowestScoreFirstFromTheStartAndSkipsEnginesWithout) {
  using S = std::optional<std::uint64_t>;
  const std::vector<S> scores = {S(4), S(1), S(1), std::nullopt};
  EXPECT_EQ(LeastLoaded(scores, 0), 1u);
  EXPECT_EQ(LeastLoaded(scores, 2), 2u);  // ties go to the first from the start
  EXPECT_EQ(LeastLoaded(scores, 3), 1u);  // wraps
  EXPECT_EQ(LeastLoaded(std::vector<S>{std::nullopt, S(9)}, 0), 1u);
  EXPECT_EQ(LeastLoaded(std::vector<S>{std::nullopt, std::nullopt}, 1), 2u);  // none alive
  EXPECT_EQ(LoadScore(2, 3), 11u);  // waiting weighs four running
}

// Every string of up to 4 characters over digits and a few others, against
// a reference: a rank is 1 to 9 decimal digits naming a served rank.
TEST(ParseDataParallelRank, AcceptsExactlyThePlainDecimalRanksServed) {
  const std::vector<std::uint32_t> ranks = {0, 1, 7};
  const std::string alphabet = "0179x -+.";
  std::vector<std::string> corpus = {
      "", "000000001", "0000000001", "99999999999999999999", "4294967297", "1e0", "\t1", "١"};
  for (std::size_t len = 1; len <= 4; ++len) {
    std::vector<std::size_t> at(len, 0);
    for (;;) {
      std::string s;
      for (std::size_t i : at) s += alphabet[i];
      corpus.push_back(s);
      std::size_t k = 0;
      while (k < len && ++at[k] == alphabet.size()) at[k++] = 0;
      if (k == len) break;
    }
  }
  for (const std::string& s : corpus) {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    const bool plain = !s.empty() && s.size() <= 9 && ec == std::errc() &&
                       end == s.data() + s.size() && s.find_first_not_of("0123456789") == s.npos;
    const auto it = std::find(ranks.begin(), ranks.end(), v);
    const bool want = plain && it != ranks.end();
    std::uint32_t place = 99;
    std::string error;
    ASSERT_EQ(ParseDataParallelRank(s, ranks, &place, &error), want) << "'" << s << "'";
    if (want) {
      EXPECT_EQ(place, static_cast<std::uint32_t>(it - ranks.begin())) << s;
      EXPECT_TRUE(error.empty());
    } else {
      EXPECT_NE(error.find("it serves 0, 1, 7"), std::string::npos) << error;
    }
  }
}

// Two fake engines, ranks 0 and 1, and a router over them.
class TwoEngines : public ::testing::Test {
 protected:
  FakeEngine::Options Fake(std::uint32_t index) {
    FakeEngine::Options o;
    const std::string base = "ipc://@sightline-router-" + sightline::testing::UniqueInstance();
    o.input_address = base + ".in";
    o.output_address = base + ".out";
    o.engine_index = index;
    return o;
  }
  EngineRouter::Options Router(const std::vector<FakeEngine::Options>& fakes,
                               std::uint32_t client_index = 0, std::uint32_t client_count = 1) {
    EngineRouter::Options o;
    o.client_index = client_index;
    o.client_count = client_count;
    for (const auto& f : fakes) {
      EngineClient::Options e;
      e.input_address = f.input_address;
      e.output_address = f.output_address;
      e.client_index = client_index;
      e.ready_timeout_s = 30;
      o.engines.push_back(e);
    }
    return o;
  }
  // Waits (at most 30 s) for `engine`'s EngineLoad number `version`.
  static bool LoadArrives(EngineClient* engine, std::uint64_t version) {
    return Eventually([&] { return engine->load().version >= version; });
  }
  static std::vector<std::size_t> Picks(EngineRouter& r, int n) {
    std::vector<std::size_t> out;
    for (int i = 0; i < n; ++i) out.push_back(r.Pick(std::nullopt) == r.engine(0) ? 0 : 1);
    return out;
  }
};

TEST_F(TwoEngines, EachPickCountsUntilTheEnginesNextLoadReplacesTheGuess) {
  const auto a = Fake(0), b = Fake(1);
  FakeEngine e0(a), e1(b);
  EngineRouter router(Router({a, b}));
  EngineInfo info;
  ASSERT_TRUE(router.Start(&info).ok());
  EXPECT_EQ(std::vector<std::uint32_t>(router.ranks().begin(), router.ranks().end()),
            (std::vector<std::uint32_t>{0, 1}));
  // No load heard yet: each pick raises its engine's waiting by one (4 points).
  EXPECT_EQ(Picks(router, 4), (std::vector<std::size_t>{0, 1, 0, 1}));
  // Engine 1 reports 5 waiting (20), engine 0 an empty queue (0): engine 0
  // takes picks until its guessed score passes 20 (ties go to the scan's
  // start, 0).
  e0.PublishLoad(0, 0);
  e1.PublishLoad(5, 0);
  ASSERT_TRUE(LoadArrives(router.engine(0), 1));
  ASSERT_TRUE(LoadArrives(router.engine(1), 1));
  EXPECT_EQ(Picks(router, 7), (std::vector<std::size_t>{0, 0, 0, 0, 0, 0, 1}));
  // A fresh load replaces the guesses: engine 0 busy now.
  e0.PublishLoad(5, 8);
  ASSERT_TRUE(LoadArrives(router.engine(0), 2));
  EXPECT_EQ(Picks(router, 1), (std::vector<std::size_t>{1}));  // 28 against 20 + 4
  // A pinned place is that engine, whatever the scores.
  EXPECT_EQ(router.Pick(0), router.engine(0));
  EXPECT_EQ(router.Pick(1), router.engine(1));
  EXPECT_EQ(router.Pick(2), nullptr);
}

// API server 1 of 2 starts its scan at engine 1 (N * index / count), so two
// API servers that see the same idle engines send their first requests apart;
// its bump is the API-server count, as vLLM guesses every server sends one.
TEST_F(TwoEngines, AnotherApiServerStartsItsScanElsewhereAndBumpsByTheServerCount) {
  const auto a = Fake(0), b = Fake(1);
  FakeEngine e0(a), e1(b);
  EngineRouter router(Router({a, b}, /*client_index=*/1, /*client_count=*/2));
  EngineInfo info;
  ASSERT_TRUE(router.Start(&info).ok());
  // 0/0: engine 1 first; then engine 1 has 2 waiting (8) and engine 0 wins.
  EXPECT_EQ(Picks(router, 4), (std::vector<std::size_t>{1, 0, 1, 0}));
}

TEST_F(TwoEngines, EnginesThatDisagreeOrSitInTheWrongPlaceAreRefused) {
  auto a = Fake(0), b = Fake(1);
  b.max_model_len = 1024;
  {
    FakeEngine e0(a), e1(b);
    EngineRouter router(Router({a, b}));
    EngineInfo info;
    const Status s = router.Start(&info);
    EXPECT_NE(s.message().find("engine 1 differs from engine 0 in max_model_len"),
              std::string::npos)
        << s.message();
  }
  auto c = Fake(1), d = Fake(0);  // listed in the wrong order
  FakeEngine e1(c), e0(d);
  EngineRouter router(Router({c, d}));
  EngineInfo info;
  const Status s = router.Start(&info);
  EXPECT_NE(s.message().find("says it is engine 1"), std::string::npos) << s.message();
  // One engine alone may be any rank (an API server of one rank).
  EngineRouter alone(Router({c}));
  ASSERT_TRUE(alone.Start(&info).ok());
  EXPECT_EQ(info.engine_index, 1u);
  EXPECT_EQ(alone.ranks()[0], 1u);
}

// Prefix affinity: the engine holding the longest cached prefix of the
// prompt's blocks gets it, within kPrefixAffinityBound of the lowest score;
// what an engine removes or clears stops counting; off, load alone decides.
TEST_F(TwoEngines, APromptGoesWhereItsPrefixIsCachedWithinTheBound) {
  const auto a = Fake(0), b = Fake(1);
  FakeEngine e0(a), e1(b);
  EngineRouter router(Router({a, b}));
  EngineInfo info;
  ASSERT_TRUE(router.Start(&info).ok());
  ASSERT_TRUE(router.prefix_affinity());
  e0.PublishCache(false, {7});
  e1.PublishCache(false, {1, 2});
  const std::vector<std::uint64_t> prompt = {1, 2, 3};
  ASSERT_TRUE(Eventually([&] {
    return router.engine(1)->CachedPrefix(prompt) == 2 &&
           router.engine(0)->CachedPrefix(std::vector<std::uint64_t>{7}) == 1;
  }));
  ASSERT_EQ(router.engine(1)->CachedPrefix(prompt), 2u);
  EXPECT_EQ(router.engine(1)->CachedPrefix(std::vector<std::uint64_t>{3, 1}), 0u);  // leading only
  // Both idle: the cached prefix decides, not the scan's start (engine 0).
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(1));
  // Engine 1 now has 1 waiting (4): still within the bound of engine 0's 0.
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(1));
  // A prompt cached nowhere goes by load: engine 0 (0 against 8).
  EXPECT_EQ(router.Pick(std::nullopt, std::vector<std::uint64_t>{9}), router.engine(0));
  // Past the bound the load wins: engine 1 at 8 + 12 = 20 > 4 + 16.
  e1.PublishLoad(3, 0);  // 12; engine 0's guess stays 4 (no load from it)
  ASSERT_TRUE(LoadArrives(router.engine(1), 1));
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(1));  // 12 <= 4 + 16
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(1));  // 16 <= 20
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(1));  // 20 <= 20
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(0));  // 24 > 20
  // A removed block, then a cleared cache, stop counting.
  e1.PublishCache(false, {}, {2});
  EXPECT_TRUE(Eventually([&] { return router.engine(1)->CachedPrefix(prompt) == 1; }));
  EXPECT_EQ(router.engine(1)->CachedPrefix(prompt), 1u);
  e1.PublishCache(true, {5});
  EXPECT_TRUE(Eventually([&] { return router.engine(1)->CachedPrefix(prompt) == 0; }));
  EXPECT_EQ(router.engine(1)->CachedPrefix(prompt), 0u);
  EXPECT_EQ(router.engine(1)->CachedPrefix(std::vector<std::uint64_t>{5}), 1u);
}

TEST_F(TwoEngines, WithoutAffinityTheLoadAloneDecides) {
  const auto a = Fake(0), b = Fake(1);
  FakeEngine e0(a), e1(b);
  EngineRouter::Options o = Router({a, b});
  o.prefix_affinity = false;
  EngineRouter router(std::move(o));
  EngineInfo info;
  ASSERT_TRUE(router.Start(&info).ok());
  EXPECT_FALSE(router.prefix_affinity());
  e1.PublishCache(false, {1, 2});
  const std::vector<std::uint64_t> prompt = {1, 2};
  EXPECT_TRUE(Eventually([&] { return router.engine(1)->CachedPrefix(prompt) == 2; }));
  ASSERT_EQ(router.engine(1)->CachedPrefix(prompt), 2u);
  EXPECT_EQ(router.Pick(std::nullopt, prompt), router.engine(0));
}

// A LoRA adapter's requests go only to engines that serve it (a restarted
// engine has only its --lora-modules); the adapters listed are every one
// some engine serves.
TEST_F(TwoEngines, AnAdaptersRequestsGoOnlyWhereItIsServed) {
  const auto a = Fake(0), b = Fake(1);
  FakeEngine e0(a), e1(b);
  EngineRouter router(Router({a, b}));
  EngineInfo info;
  ASSERT_TRUE(router.Start(&info).ok());
  e1.PublishLoras({"sql"});
  EXPECT_TRUE(Eventually([&] { return !router.lora_adapters()->empty(); }));
  ASSERT_EQ(router.lora_adapters()->size(), 1u);
  EXPECT_EQ(router.lora_adapters()->at(0).first, "sql");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(router.Pick(std::nullopt, {}, "sql"), router.engine(1));
  EXPECT_EQ(router.Pick(0, {}, "sql"), nullptr);  // pinned to an engine without it
  EXPECT_EQ(router.Pick(std::nullopt, {}, "other"), nullptr);
  EXPECT_NE(router.Pick(std::nullopt, {}, ""), nullptr);  // the base model: anywhere
}

}  // namespace
}  // namespace sightline::api
