// The logprobs objects written by hand (AppendCompletionLogprobs,
// AppendChatLogprobs) against nlohmann's dump() of the JSON values
// (CompletionLogprobs, ChatLogprobs) over a generated corpus: texts that
// need escaping, texts that decode alike (a completion's dictionary keeps
// one key), numbers of every kind; and TokenTexts against decoding each token
// alone, from several threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "output/logprobs_format.h"
#include "output/openai_render.h"
#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline::api {
namespace logprobs_format_test {

class Corpus {
 public:
  explicit Corpus(unsigned seed) : rng_(seed) {}

  std::string Text() {
    static const std::vector<std::string> kPool = {"",
                                                   "a",
                                                   " the",
                                                   "\"",
                                                   "\\",
                                                   "\n",
                                                   "\t",
                                                   "\x01",
                                                   "\x1f",
                                                   "\x7f",
                                                   "\xc3\xa9",
                                                   "\xe6\x97\xa5",
                                                   "\xf0\x9f\x98\x80",
                                                   "\xef\xbf\xbd",
                                                   "<s>",
                                                   "a\"b\\c",
                                                   "A",
                                                   "a ",
                                                   "\xc2\x80",
                                                   "/",
                                                   "\b\f\r"};
    if (Pick(3) > 0) return kPool[Pick(kPool.size())];
    std::string s;  // a few random code points of every UTF-8 length
    for (std::size_t i = Pick(6); i > 0; --i) {
      static const char32_t kSamples[] = {0x0,   0x9,    0x1f,   0x20,    0x22,
                                          0x5c,  0x7e,   0x7f,   0x80,    0x7ff,
                                          0x800, 0xfffd, 0xffff, 0x10000, 0x10ffff};
      const char32_t c = Pick(2) ? kSamples[Pick(std::size(kSamples))] : 0x20 + Pick(0x60);
      AppendUtf8(c, &s);
    }
    return s;
  }

  float Logprob() {
    static const float kSpecial[] = {0.0f,
                                     -0.0f,
                                     -std::numeric_limits<float>::denorm_min(),
                                     -std::numeric_limits<float>::min(),
                                     -1e-8f,
                                     -0.5f,
                                     -1.0f / 3.0f,
                                     -9999.0f,
                                     -10000.5f,
                                     -std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
    if (Pick(4) == 0) return kSpecial[Pick(std::size(kSpecial))];
    if (Pick(2) == 0) return -std::uniform_real_distribution<float>(0, 30)(rng_);
    return -std::ldexp(std::uniform_real_distribution<float>(0.5f, 1)(rng_),
                       static_cast<int>(Pick(80)) - 40);
  }

  LogprobEntry Entry() {
    LogprobEntry e;
    e.known = Pick(10) > 0;
    e.token = static_cast<std::int32_t>(Pick(100000));
    e.text = Text();
    e.logprob = Logprob();
    e.rank = static_cast<std::int32_t>(Pick(50000));
    for (std::size_t k = Pick(4) == 0 ? Pick(26) : Pick(6); k > 0; --k)
      e.top.push_back({static_cast<std::int32_t>(Pick(100000)), Text(), Logprob()});
    return e;
  }

  std::uint64_t Offset() {
    return Pick(2) ? Pick(1000) : std::uniform_int_distribution<std::uint64_t>()(rng_) >> 2;
  }

  std::size_t Pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

 private:
  std::mt19937_64 rng_;
};

TEST(LogprobsFormat, HandWrittenObjectsAreNlohmannsDump) {
  Corpus corpus(46);
  for (int i = 0; i < 20000; ++i) {
    std::vector<LogprobEntry> entries;
    for (std::size_t n = 1 + corpus.Pick(i % 10 == 0 ? 8 : 2); n > 0; --n)
      entries.push_back(corpus.Entry());
    const std::uint64_t offset = corpus.Offset();
    // Appended after what a buffer already holds, as into a reused one.
    std::string completion = "x", chat = "y";
    AppendCompletionLogprobs(entries, offset, &completion);
    AppendChatLogprobs(entries, &chat);
    ASSERT_EQ(completion, "x" + CompletionLogprobs(entries, offset).dump()) << "case " << i;
    ASSERT_EQ(chat, "y" + ChatLogprobs(entries).dump()) << "case " << i;
  }
}

TEST(LogprobsFormat, TokenTextsAreEachTokenDecodedAlone) {
  const auto tokenizer = MakeByteTokenizer();
  const TokenTexts texts(tokenizer.get());
  // Beyond the vocabulary too: a model's output layer may be padded.
  const std::int32_t end = tokenizer->vocab_size() + 8;
  std::vector<std::string> want;
  for (std::int32_t id = -2; id < end; ++id) {
    const std::int32_t one[] = {id};
    want.push_back(LossyUtf8(tokenizer->Decode(one, DecodeOptions{.skip_special_tokens = false})));
  }
  // Four threads race to fill the cache; each sees every text right.
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (std::int32_t id = -2; id < end; ++id) {
          const std::int32_t at = t % 2 ? end - 1 - (id + 2) : id;
          if (texts.Get(at) != want[static_cast<std::size_t>(at + 2)]) ++wrong[t];
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
  // Kept: the same string every time.
  EXPECT_EQ(&texts.Get('a'), &texts.Get('a'));
  EXPECT_EQ(&texts.Get(end - 1), &texts.Get(end - 1));
  EXPECT_EQ(texts.Get(200), "\xef\xbf\xbd");  // a lone byte that is not UTF-8
}

// One entry decoded into again and again, as the output processor reuses
// its token's: top lists that shrink, vanish and grow, an unscored entry
// before; each time equal to a fresh decode.
TEST(LogprobsFormat, AReusedEntryHoldsOnlyTheLatestToken) {
  const auto tokenizer = MakeByteTokenizer();
  const TokenTexts texts(tokenizer.get());
  LogprobEntry reused = UnscoredEntry('q', texts);
  for (const int k : {5, 0, 3, 20, 1, 0, 7}) {
    flatbuffers::FlatBufferBuilder b;
    std::vector<std::int32_t> top;
    std::vector<float> values;
    for (int i = 0; i < k; ++i) {
      top.push_back(k % 2 ? 200 + i : 'a' + i);  // some not UTF-8 alone
      values.push_back(-0.25f * static_cast<float>(i + 1));
    }
    b.Finish(ipc::CreateTokenLogprobsDirect(b, 'a' + k, -0.125f * static_cast<float>(k), k + 1,
                                            &top, &values));
    const auto* l = flatbuffers::GetRoot<ipc::TokenLogprobs>(b.GetBufferPointer());
    DecodeLogprobs(*l, texts, &reused);
    const LogprobEntry fresh = DecodeLogprobs(*l, texts);
    const std::vector<LogprobEntry> one_reused = {reused}, one_fresh = {fresh};
    EXPECT_EQ(CompletionLogprobs(one_reused, 3).dump(), CompletionLogprobs(one_fresh, 3).dump());
    EXPECT_EQ(ChatLogprobs(one_reused).dump(), ChatLogprobs(one_fresh).dump());
    EXPECT_TRUE(reused.known);
    EXPECT_EQ(reused.rank, k + 1);
    ASSERT_EQ(reused.top.size(), static_cast<std::size_t>(k));
  }
}

class Silent : public Responder {
 public:
  void Send(HttpResponse) override {}
  void StartStream(int, std::string, std::map<std::string, std::string>) override {}
  void Write(std::string) override {}
  void End(std::string) override {}
  void OnDisconnect(std::function<void()>) override {}
};

// A body that does not stream writes each choice's logprobs by hand into
// its place: the body is still exactly what nlohmann writes (parsing and
// dumping it again changes nothing), its logprobs the JSON values'. Also
// when a choice's text holds the placeholder, which sends the whole body
// through JSON values.
TEST(LogprobsFormat, BodiesWithLogprobsAreNlohmannsDump) {
  Corpus corpus(7);
  for (const bool chat : {false, true})
    for (const std::size_t n : {1, 3})
      for (const bool placeholder_in_text : {false, true}) {
        RenderOptions o;
        o.id = "cmpl-1";
        o.model = "m";
        o.chat = chat;
        o.logprobs = true;
        o.choices = n;
        o.per_request_metrics = n == 1;  // the metrics go in once, on either path
        OpenAiRenderer renderer(o, std::make_shared<Silent>());
        std::vector<std::vector<LogprobEntry>> want(n);
        for (std::uint32_t i = 0; i < n; ++i) {
          if (!chat && !placeholder_in_text) {  // an echoed prompt: its first token unscored
            std::vector<LogprobEntry> prompt = {corpus.Entry(), corpus.Entry()};
            prompt[0].known = false;
            want[i] = prompt;
            renderer.Echo(i, "the prompt ", prompt);
            renderer.PromptLogprobsField(i, PromptLogprobs(prompt));
          }
          for (int t = 0; t < 20; ++t) {
            LogprobEntry e = corpus.Entry();
            e.known = true;
            // The placeholder as the choice's whole text: quoted, as its
            // logprobs' is, so it is not unique.
            const std::string text = !placeholder_in_text ? corpus.Text()
                                     : t == 3 ? EventTemplate::Placeholder(static_cast<int>(i))
                                              : std::string();
            renderer.Text(i, text, true, std::span<const LogprobEntry>(&e, 1));
            want[i].push_back(e);
          }
          renderer.EndChoice(i, "length");
        }
        const std::string body = renderer.Finished(FinishedRequest{}, 20).body.body;
        if (placeholder_in_text) {  // the fallback, through JSON values
          ASSERT_NE(body.find('"' + EventTemplate::Placeholder(0) + '"'), std::string::npos);
        }
        const nlohmann::json parsed = nlohmann::json::parse(body);
        EXPECT_EQ(parsed.dump(), body) << chat << n << placeholder_in_text;
        EXPECT_EQ(parsed.contains("metrics"), n == 1);
        if (!chat && !placeholder_in_text) {
          EXPECT_TRUE(parsed["choices"][0].contains("prompt_logprobs"));
        }
        for (std::size_t i = 0; i < n; ++i)
          EXPECT_EQ(parsed["choices"][i]["logprobs"].dump(),  // NaN is null once dumped
                    (chat ? ChatLogprobs(want[i]) : CompletionLogprobs(want[i], 0)).dump())
              << chat << n << placeholder_in_text << i;
      }
}

// The splice itself: each choice's object where its placeholder is; none
// when a text holds a quoted placeholder anywhere (before, after or as
// another choice's), which would otherwise be spliced into.
TEST(LogprobsFormat, WithLogprobsSplicesOnlyUniquePlaceholders) {
  Corpus corpus(3);
  std::vector<std::vector<LogprobEntry>> entries(3);
  for (auto& e : entries)
    for (int t = 0; t < 4; ++t) e.push_back(corpus.Entry());
  const std::vector<std::span<const LogprobEntry>> spans(entries.begin(), entries.end());
  auto body = [&](const std::vector<std::string>& texts, bool real) {
    nlohmann::json choices = nlohmann::json::array();
    for (std::size_t i = 0; i < texts.size(); ++i)
      choices.push_back(
          {{"index", i},
           {"logprobs", real ? CompletionLogprobs(entries[i], 0)
                             : nlohmann::json(EventTemplate::Placeholder(static_cast<int>(i)))},
           {"text", texts[i]}});
    return nlohmann::json{{"choices", choices}, {"id", "x"}}.dump();
  };
  const std::vector<std::string> plain = {"a", "b\"c", ""};
  const auto spliced = WithLogprobs(body(plain, false), spans, false);
  ASSERT_TRUE(spliced.has_value());
  EXPECT_EQ(*spliced, body(plain, true));
  const std::string p0 = EventTemplate::Placeholder(0), p1 = EventTemplate::Placeholder(1);
  for (const std::vector<std::string>& texts :
       std::vector<std::vector<std::string>>{{p1, "b", "c"},          // a later one, earlier
                                             {"a", p0, "c"},          // an earlier one, later
                                             {"x\"" + p0, "b", "c"},  // after an escaped quote
                                             {"a", "b", p1 + "\" tail"}}) {
    EXPECT_FALSE(WithLogprobs(body(texts, false), spans, false).has_value()) << texts[0];
  }
}

}  // namespace logprobs_format_test
}  // namespace sightline::api
