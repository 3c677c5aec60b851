#include "output/logprobs_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "output/event_template.h"
#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline::api {

using nlohmann::json;

namespace {

double Shown(float logprob) {
  return std::max(static_cast<double>(logprob), -9999.0);
}

json Bytes(const std::string& text) {
  json out = json::array();
  for (const char ch : text) out.push_back(static_cast<unsigned char>(ch));
  return out;
}

// dump()'s number: nlohmann's own shortest round-trip formatter (Grisu2,
// which is not always the shortest, so std::to_chars could differ), and
// null for what is not finite. detail::to_chars is nlohmann's internal
// function (3.11's serializer calls it with this 64-byte buffer): a version
// that moved it fails to build, one that changed it fails the corpus test.
void AppendNumber(double v, std::string* out) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  char buffer[64];  // nlohmann's number buffer
  const char* end = nlohmann::detail::to_chars(buffer, buffer + sizeof buffer, v);
  out->append(buffer, static_cast<std::size_t>(end - buffer));
}

template <typename Integer>
void AppendInteger(Integer v, std::string* out) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  out->append(buffer, static_cast<std::size_t>(result.ptr - buffer));
}

void AppendBytes(std::string_view text, std::string* out) {
  *out += '[';
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i > 0) *out += ',';
    AppendInteger(static_cast<unsigned>(static_cast<unsigned char>(text[i])), out);
  }
  *out += ']';
}

// A completion's top_logprobs dictionary as nlohmann's object holds it: keys
// in byte order, and of tokens that decode alike the first added (the most
// likely; the chosen token last). Sorted by (text, order added) into a list
// each thread reuses, so nothing is allocated once it has grown; O(k log k)
// however large --max-logprobs is.
void AppendTopDictionary(const LogprobEntry& e, std::string* out) {
  struct Key {
    std::string_view text;
    std::size_t order;
    float logprob;
  };
  thread_local std::vector<Key> keys;
  keys.clear();
  for (const LogprobEntry::Top& t : e.top) keys.push_back({t.text, keys.size(), t.logprob});
  keys.push_back({e.text, keys.size(), e.logprob});
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.text != b.text ? a.text < b.text : a.order < b.order;
  });
  *out += '{';
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i > 0 && keys[i].text == keys[i - 1].text) continue;  // an earlier one keeps the key
    if (i > 0) *out += ',';
    EventTemplate::AppendQuoted(keys[i].text, out);
    *out += ':';
    AppendNumber(Shown(keys[i].logprob), out);
  }
  *out += '}';
}

}  // namespace

TokenTexts::TokenTexts(const Tokenizer* tokenizer)
    : tokenizer_(tokenizer),
      size_(static_cast<std::size_t>(std::max(0, tokenizer->vocab_size()))),
      slots_(std::make_unique<std::atomic<const std::string*>[]>(size_)) {}

TokenTexts::~TokenTexts() {
  for (std::size_t i = 0; i < size_; ++i) delete slots_[i].load(std::memory_order_relaxed);
}

std::string TokenTexts::Decode(std::int32_t token) const {
  DecodeOptions keep;
  keep.skip_special_tokens = false;
  const std::int32_t one[] = {token};
  return LossyUtf8(tokenizer_->Decode(one, keep));
}

const std::string& TokenTexts::Get(std::int32_t token) const {
  if (token >= 0 && static_cast<std::size_t>(token) < size_) {
    std::atomic<const std::string*>& slot = slots_[static_cast<std::size_t>(token)];
    const std::string* text = slot.load(std::memory_order_acquire);
    if (text) return *text;
    auto fresh = std::make_unique<const std::string>(Decode(token));
    // Two threads may decode the same token at once: the first to store wins.
    if (slot.compare_exchange_strong(text, fresh.get(), std::memory_order_acq_rel))
      return *fresh.release();
    return *text;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = others_.find(token);
  if (it == others_.end()) it = others_.emplace(token, Decode(token)).first;
  return it->second;
}

void DecodeLogprobs(const ipc::TokenLogprobs& l, const TokenTexts& texts, LogprobEntry* out) {
  out->known = true;
  out->token = l.token();
  out->text = texts.Get(l.token());
  out->logprob = l.logprob();
  out->rank = l.rank();
  const auto* ids = l.top_tokens();
  const auto* lps = l.top_logprobs();
  const std::size_t n = ids && lps ? std::min(ids->size(), lps->size()) : 0;
  out->top.resize(n, LogprobEntry::Top{-1, {}, 0});
  for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
    LogprobEntry::Top& t = out->top[i];
    t.token = ids->Get(i);
    t.text = texts.Get(t.token);
    t.logprob = lps->Get(i);
  }
}

LogprobEntry DecodeLogprobs(const ipc::TokenLogprobs& l, const TokenTexts& texts) {
  LogprobEntry e;
  DecodeLogprobs(l, texts, &e);
  return e;
}

LogprobEntry UnscoredEntry(std::int32_t token, const TokenTexts& texts) {
  LogprobEntry e;
  e.known = false;
  e.token = token;
  e.text = texts.Get(token);
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

std::uint64_t AppendCompletionLogprobs(std::span<const LogprobEntry> entries,
                                       std::uint64_t text_offset, std::string* out) {
  // Keys in nlohmann's (sorted) order: text_offset, token_logprobs, tokens, top_logprobs.
  *out += "{\"text_offset\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += ',';
    AppendInteger(text_offset, out);
    text_offset += TextOffsetLength(entries[i].text);
  }
  *out += "],\"token_logprobs\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += ',';
    if (entries[i].known)
      AppendNumber(Shown(entries[i].logprob), out);
    else
      *out += "null";
  }
  *out += "],\"tokens\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += ',';
    EventTemplate::AppendQuoted(entries[i].text, out);
  }
  *out += "],\"top_logprobs\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += ',';
    if (entries[i].known)
      AppendTopDictionary(entries[i], out);
    else
      *out += "null";
  }
  *out += "]}";
  return text_offset;
}

void AppendChatLogprobs(std::span<const LogprobEntry> entries, std::string* out) {
  // Keys in nlohmann's order: bytes, logprob, token, top_logprobs.
  *out += "{\"content\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LogprobEntry& e = entries[i];
    if (i > 0) *out += ',';
    *out += "{\"bytes\":";
    AppendBytes(e.text, out);
    *out += ",\"logprob\":";
    AppendNumber(Shown(e.logprob), out);
    *out += ",\"token\":";
    EventTemplate::AppendQuoted(e.text, out);
    *out += ",\"top_logprobs\":[";
    for (std::size_t j = 0; j < e.top.size(); ++j) {
      const LogprobEntry::Top& t = e.top[j];
      if (j > 0) *out += ',';
      *out += "{\"bytes\":";
      AppendBytes(t.text, out);
      *out += ",\"logprob\":";
      AppendNumber(Shown(t.logprob), out);
      *out += ",\"token\":";
      EventTemplate::AppendQuoted(t.text, out);
      *out += '}';
    }
    *out += "]}";
  }
  *out += "]}";
}

}  // namespace sightline::api
