#include "output/logprobs_format.h"

#include <algorithm>

#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline::api {

using nlohmann::json;

namespace {

std::string TokenText(std::int32_t token, const Tokenizer& tokenizer) {
  DecodeOptions keep;
  keep.skip_special_tokens = false;
  const std::int32_t one[] = {token};
  return LossyUtf8(tokenizer.Decode(one, keep));
}

double Shown(float logprob) {
  return std::max(static_cast<double>(logprob), -9999.0);
}

json Bytes(const std::string& text) {
  json out = json::array();
  for (const char ch : text) out.push_back(static_cast<unsigned char>(ch));
  return out;
}

}  // namespace

LogprobEntry DecodeLogprobs(const ipc::TokenLogprobs& l, const Tokenizer& tokenizer) {
  LogprobEntry e;
  e.token = l.token();
  e.text = TokenText(l.token(), tokenizer);
  e.logprob = l.logprob();
  e.rank = l.rank();
  const auto* ids = l.top_tokens();
  const auto* lps = l.top_logprobs();
  if (ids && lps)
    for (flatbuffers::uoffset_t i = 0; i < std::min(ids->size(), lps->size()); ++i)
      e.top.push_back({ids->Get(i), TokenText(ids->Get(i), tokenizer), lps->Get(i)});
  return e;
}

LogprobEntry UnscoredEntry(std::int32_t token, const Tokenizer& tokenizer) {
  LogprobEntry e;
  e.known = false;
  e.token = token;
  e.text = TokenText(token, tokenizer);
  return e;
}

std::uint64_t TextOffsetLength(const std::string& text) {
  return CodePointCount(text);  // Python's len(), which vLLM's offsets add up
}

json CompletionLogprobs(const std::vector<LogprobEntry>& entries, std::uint64_t text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const LogprobEntry& e : entries) {
    offsets.push_back(text_offset);
    tokens.push_back(e.text);
    if (!e.known) {  // the prompt's first token: its text, nothing scored
      token_logprobs.push_back(nullptr);
      top.push_back(nullptr);
    } else {
      token_logprobs.push_back(Shown(e.logprob));
      // Tokens that decode alike share a key: the most likely keeps it.
      json dict = json::object();
      for (const LogprobEntry::Top& t : e.top)
        if (!dict.contains(t.text)) dict[t.text] = Shown(t.logprob);
      if (!dict.contains(e.text)) dict[e.text] = Shown(e.logprob);
      top.push_back(std::move(dict));
    }
    text_offset += TextOffsetLength(e.text);
  }
  return {{"text_offset", offsets},
          {"token_logprobs", token_logprobs},
          {"tokens", tokens},
          {"top_logprobs", top}};
}

json ChatLogprobs(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json top = json::array();
    for (const LogprobEntry::Top& t : e.top)
      top.push_back({{"token", t.text}, {"logprob", Shown(t.logprob)}, {"bytes", Bytes(t.text)}});
    content.push_back({{"token", e.text},
                       {"logprob", Shown(e.logprob)},
                       {"bytes", Bytes(e.text)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json PromptLogprobs(const std::vector<LogprobEntry>& entries) {
  json out = json::array();
  for (const LogprobEntry& e : entries) {
    if (!e.known) {
      out.push_back(nullptr);
      continue;
    }
    json dict = json::object();
    for (std::size_t i = 0; i < e.top.size(); ++i) {
      const LogprobEntry::Top& t = e.top[i];
      dict[std::to_string(t.token)] = {{"logprob", Shown(t.logprob)},
                                       {"rank", static_cast<std::int64_t>(i) + 1},
                                       {"decoded_token", t.text}};
    }
    dict[std::to_string(e.token)] = {
        {"logprob", Shown(e.logprob)}, {"rank", e.rank}, {"decoded_token", e.text}};
    out.push_back(std::move(dict));
  }
  return out;
}

}  // namespace sightline::api
