// The engine, tokenizer and parse context the body-parsing tests share: the
// byte tokenizer, a 64-token context, vocabulary 260, logprobs computed (a
// CPU engine), at most 20.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "completion_request.h"

namespace sightline::api {

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
    int status = 0;
    const Status s = ParseGeneration(body.dump(), chat, ctx_, &p, &status);
    EXPECT_TRUE(s.ok()) << body.dump() << ": " << s.message();
    return p;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  EngineInfo engine_;
  ParseContext ctx_;
};

}  // namespace sightline::api
