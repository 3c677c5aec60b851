// The engine, tokenizer and parse context the body-parsing tests share (the
// byte tokenizer, a 64-token context, vocabulary 260, logprobs computed, as
// a CPU engine does, at most 20), and their helpers: Accept a body, Parse one
// on any endpoint, and NamesAPlace to check an error's param.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "openai/completion_request.h"

namespace sightline::api {

// Whether `param` ("messages[0].content[1].type") names a place in `body`: a
// value there, or a key missing from an object there ("... is required").
inline bool NamesAPlace(const nlohmann::json& body, const std::string& param) {
  const nlohmann::json* at = &body;
  std::size_t i = 0;
  while (i < param.size()) {
    if (param[i] == '[') {
      const std::size_t close = param.find(']', i);
      if (close == std::string::npos || !at->is_array()) return false;
      const std::size_t k = std::stoul(param.substr(i + 1, close - i - 1));
      if (k >= at->size()) return false;
      at = &(*at)[k];
      i = close + 1;
      continue;
    }
    if (param[i] == '.') ++i;
    const std::size_t end = std::min(param.find_first_of(".[", i), param.size());
    if (!at->is_object()) return false;
    const auto it = at->find(param.substr(i, end - i));
    if (it == at->end()) return end == param.size();
    at = &*it;
    i = end;
  }
  return true;
}

class ParsingFixture : public ::testing::Test {
 protected:
  ParsingFixture() : tokenizer_(MakeByteTokenizer()) {
    engine_.max_model_len = 64;
    engine_.vocab_size = 260;
    engine_.logprobs_supported = true;
    engine_.max_logprobs = 20;
    ctx_ = {tokenizer_.get(), &engine_, "tiny", PlainChatTemplate()};
  }
  // The params of a body that must be accepted.
  CompletionParams Accept(const nlohmann::json& body, bool chat = false) {
    CompletionParams p;
    RequestError e;
    EXPECT_TRUE(ParseGeneration(body.dump(), chat, ctx_, &p, &e))
        << body.dump() << ": " << e.message;
    return p;
  }
  enum Endpoint { kCompletions, kChat, kResponses, kTokenize, kDetokenize };
  struct Outcome {
    int status = 200;
    std::string message, param;
  };
  // Any endpoint's parser on a raw body; status 200 when it accepts.
  Outcome Parse(Endpoint endpoint, const std::string& body) {
    CompletionParams p;
    std::string text;
    std::vector<std::int32_t> tokens;
    bool add_special = false;
    Outcome o;
    RequestError e;
    const bool ok = endpoint == kCompletions ? ParseGeneration(body, false, ctx_, &p, &e)
                    : endpoint == kChat      ? ParseGeneration(body, true, ctx_, &p, &e)
                    : endpoint == kResponses ? ParseResponses(body, ctx_, &p, &e)
                    : endpoint == kTokenize  ? ParseTokenize(body, ctx_, &text, &add_special, &e)
                                             : ParseDetokenize(body, ctx_, &tokens, &e);
    o.param = e.param;
    if (ok) {
      // What an accepted body promises the rest of the server.
      EXPECT_TRUE(o.param.empty());
      if (endpoint <= kResponses) {
        EXPECT_GE(p.n, 1u);
        EXPECT_LE(p.prompts.size() * p.n, kMaxChoices);
        for (const auto& one : p.prompts) EXPECT_FALSE(one.empty());
        EXPECT_LE(p.stop.size(), kMaxStopStrings);
      }
      return o;
    }
    o.status = e.status;
    o.message = e.message;
    return o;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  EngineInfo engine_;
  ParseContext ctx_;
};

}  // namespace sightline::api
