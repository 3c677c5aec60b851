// Differential test against Hugging Face: every reference tokenizer in
// testdata/tokenizers/ must encode and decode the corpus exactly as the Rust
// `tokenizers` library does (outputs recorded by tools/testdata/tokenizer_reference/),
// stream through IncrementalDetokenizer to the same text, and decode invalid
// UTF-8 byte sequences to the same replacement characters. The only accepted
// differences are those listed, with a reason, in known_differences.json.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sightline/tokenizer/detokenizer.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline {
namespace {

using nlohmann::json;

const std::string kTokenizerDir = std::string(SIGHTLINE_TESTDATA) + "/tokenizers/";

json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// Printable form of a string for failure messages: every byte outside
// printable ASCII as \xHH, so invalid UTF-8 is visible rather than replaced.
std::string Show(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

std::string ShowIds(const std::vector<std::int32_t>& ids) {
  return json(ids).dump();
}

// The text of a test case, truncated for messages.
std::string Label(const std::string& text) {
  std::string shown = Show(text);
  return shown.size() > 120 ? shown.substr(0, 120) + "...\"" : shown;
}

class KnownDifferences {
 public:
  explicit KnownDifferences(const std::string& tokenizer) {
    json all = ReadJson(kTokenizerDir + "known_differences.json");
    if (all.contains("differences") && all["differences"].contains(tokenizer)) {
      for (const json& d : all["differences"][tokenizer]) {
        EXPECT_TRUE(d.contains("reason") && !d["reason"].get<std::string>().empty())
            << "known difference without a reason: " << d.dump();
        entries_.push_back({d.at("text").get<std::string>(), d.at("check").get<std::string>()});
      }
    }
  }
  bool Has(const std::string& text, const std::string& check) const {
    for (const auto& [t, c] : entries_) {
      if (t == text && c == check) return true;
    }
    return false;
  }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// Counts one kind of comparison; failures beyond the first few are counted, not printed.
struct Check {
  const char* name;
  int match = 0;
  int known = 0;
  int total = 0;
  int printed = 0;
};

class Comparer {
 public:
  Comparer(const std::string& tokenizer, const KnownDifferences* known)
      : tokenizer_(tokenizer), known_(known) {}

  template <typename T>
  void Compare(Check* c, const std::string& text, const T& want, const T& got) {
    ++c->total;
    if (want == got) {
      ++c->match;
      return;
    }
    if (known_->Has(text, c->name)) {
      ++c->known;
      return;
    }
    if (c->printed++ < 5) {
      ADD_FAILURE() << tokenizer_ << " " << c->name << " differs for " << Label(text) << "\n  want "
                    << Format(want) << "\n  got  " << Format(got);
    }
  }

 private:
  static std::string Format(const std::string& s) { return Show(s); }
  static std::string Format(const std::vector<std::int32_t>& v) { return ShowIds(v); }
  std::string tokenizer_;
  const KnownDifferences* known_;
};

std::string StreamAll(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                      DecodeOptions options) {
  IncrementalDetokenizer detok(&t, options);
  std::string text;
  for (std::int32_t id : ids) text += detok.Add(id);
  return text + detok.Flush();
}

DecodeOptions Options(bool skip_special_tokens) {
  DecodeOptions o;
  o.skip_special_tokens = skip_special_tokens;
  return o;
}

void RunReference(const std::string& name) {
  const std::string dir = kTokenizerDir + name;
  std::unique_ptr<Tokenizer> t;
  Status s = LoadHfTokenizer(dir + "/tokenizer.json", &t);
  // A refused tokenizer is a failure, not a skip: each of these must load.
  ASSERT_TRUE(s.ok()) << name << ": LoadHfTokenizer refused it: " << s.ToString();
  const json ref = ReadJson(dir + "/reference.json");
  const KnownDifferences known(name);
  Comparer cmp(name, &known);

  Check encode{"encode"}, encode_special{"encode_special"}, decode{"decode"},
      decode_skip{"decode_skip"}, decode_special{"decode_special"},
      decode_special_skip{"decode_special_skip"}, stream{"stream"};
  for (const json& c : ref.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const auto want_ids = c.at("ids").get<std::vector<std::int32_t>>();
    const auto want_special = c.at("ids_special").get<std::vector<std::int32_t>>();
    cmp.Compare(&encode, text, want_ids, t->Encode(text, false));
    cmp.Compare(&encode_special, text, want_special, t->Encode(text, true));
    // Decoding is compared on HF's ids, so an encode difference does not
    // hide or cause a decode one.
    cmp.Compare(&decode, text, c.at("decode").get<std::string>(),
                t->Decode(want_ids, Options(false)));
    cmp.Compare(&decode_skip, text, c.at("decode_skip").get<std::string>(),
                t->Decode(want_ids, Options(true)));
    cmp.Compare(&decode_special, text, c.at("decode_special").get<std::string>(),
                t->Decode(want_special, Options(false)));
    cmp.Compare(&decode_special_skip, text, c.at("decode_special_skip").get<std::string>(),
                t->Decode(want_special, Options(true)));
    // Streaming: the deltas add up to HF's decode of the whole sequence.
    cmp.Compare(&stream, text, c.at("decode_special").get<std::string>(),
                StreamAll(*t, want_special, Options(false)));
  }

  Check invalid{"invalid_utf8"}, invalid_prefix{"invalid_utf8_prefix"},
      invalid_stream{"invalid_utf8_stream"};
  for (const json& c : ref.at("invalid_utf8")) {
    const std::string case_name = c.at("name").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<std::int32_t>>();
    const std::string want = c.at("decode").get<std::string>();
    cmp.Compare(&invalid, case_name, want, t->Decode(ids, Options(false)));
    const auto prefixes = c.at("prefix_decodes").get<std::vector<std::string>>();
    for (std::size_t k = 1; k <= ids.size(); ++k) {
      const std::vector<std::int32_t> prefix(ids.begin(),
                                             ids.begin() + static_cast<std::ptrdiff_t>(k));
      cmp.Compare(&invalid_prefix, case_name + " [:" + std::to_string(k) + "]", prefixes[k - 1],
                  t->Decode(prefix, Options(false)));
    }
    cmp.Compare(&invalid_stream, case_name, want, StreamAll(*t, ids, Options(false)));
  }

  std::ostringstream summary;
  for (const Check* c :
       {&encode, &encode_special, &decode, &decode_skip, &decode_special, &decode_special_skip,
        &stream, &invalid, &invalid_prefix, &invalid_stream}) {
    summary << " " << c->name << "=" << c->match << "/" << c->total;
    if (c->known > 0) summary << "(+" << c->known << " known)";
    ::testing::Test::RecordProperty(std::string(c->name) + "_match",
                                    std::to_string(c->match) + "/" + std::to_string(c->total));
  }
  std::cout << "[hf_reference] " << name << ":" << summary.str() << "\n";
}

TEST(HfReference, Llama3_1) {
  RunReference("llama3_1");
}
TEST(HfReference, Qwen3) {
  RunReference("qwen3");
}
TEST(HfReference, Qwen2_5) {
  RunReference("qwen2_5");
}
TEST(HfReference, Gemma3) {
  RunReference("gemma3");
}
TEST(HfReference, Mistral7b) {
  RunReference("mistral_7b");
}
TEST(HfReference, MistralNemo) {
  RunReference("mistral_nemo");
}
TEST(HfReference, Gpt2) {
  RunReference("gpt2");
}
TEST(HfReference, DeepseekV3) {
  RunReference("deepseek_v3");
}

// The data is what the generator wrote: a corpus of the promised size whose
// strings every reference covers, in order.
TEST(HfReference, CorpusCoversEveryTokenizer) {
  const json corpus = ReadJson(kTokenizerDir + "corpus.json");
  ASSERT_GE(corpus.size(), 600u);
  for (const char* name : {"llama3_1", "qwen3", "qwen2_5", "gemma3", "mistral_7b", "mistral_nemo",
                           "gpt2", "deepseek_v3"}) {
    const json ref = ReadJson(kTokenizerDir + name + "/reference.json");
    ASSERT_EQ(ref.at("cases").size(), corpus.size()) << name;
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      ASSERT_EQ(ref["cases"][i].at("text"), corpus[i]) << name << " case " << i;
    }
    EXPECT_GE(ref.at("invalid_utf8").size(), 10u) << name;
  }
}

}  // namespace
}  // namespace sightline
