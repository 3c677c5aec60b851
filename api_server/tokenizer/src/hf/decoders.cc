// Decoders, following `tokenizers` src/decoders/*.rs line by line; where the
// Rust code has a quirk (Metaspace drops every replacement character of the
// first token; ByteFallback gives one U+FFFD per byte of an invalid run;
// ByteLevel passes a token with a character outside its alphabet through as
// raw bytes) the quirk is kept, since the point is to decode as it does.
#include "hf/decoders.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "hf/regex.h"
#include "hf/unicode.h"

namespace sightline::hf {
namespace {

using nlohmann::json;

class ByteLevelDecoder : public Decoder {
 public:
  ByteLevelDecoder() {
    // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
    // others for 256, 257, ... in byte order.
    char32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      char_byte_[printable ? static_cast<char32_t>(b) : extra++] = static_cast<unsigned char>(b);
    }
  }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& t : *tokens) {
      std::string mapped;
      bool all = true;
      for (char32_t c : DecodeUtf8(t)) {
        const auto it = char_byte_.find(c);
        if (it == char_byte_.end()) {
          all = false;
          break;
        }
        mapped.push_back(static_cast<char>(it->second));
      }
      bytes += all ? mapped : t;
    }
    *tokens = {LossyUtf8(bytes)};  // String::from_utf8_lossy
  }

 private:
  std::unordered_map<char32_t, unsigned char> char_byte_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool prepends)
      : replacement_(replacement), prepends_(prepends) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::size_t i = 0; i < tokens->size(); ++i) {
      std::string out;
      for (char32_t c : DecodeUtf8((*tokens)[i])) {
        if (c != replacement_)
          AppendUtf8(c, &out);
        else if (!(i == 0 && prepends_))
          out.push_back(' ');
      }
      (*tokens)[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool prepends_;  // prepend_scheme is not "never"
};

class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (IsValidUtf8(run))
        out.push_back(run);
      else
        for (std::size_t i = 0; i < run.size(); ++i) out.push_back(std::string(kReplacementUtf8));
      run.clear();
    };
    for (std::string& t : *tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>')
        byte = ParseHexByte(t[3], t[4]);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    *tokens = std::move(out);
  }

 private:
  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // u8::from_str_radix(s, 16) on two bytes: it also takes "+X".
  static int ParseHexByte(char a, char b) {
    if (a == '+') return Hex(b);
    const int hi = Hex(a), lo = Hex(b);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    *tokens = {all};
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      const std::vector<char32_t> chars = DecodeUtf8(t);
      std::size_t start_cut = 0;
      for (std::size_t i = 0; i < start_ && i < chars.size() && chars[i] == content_; ++i)
        start_cut = i + 1;
      std::size_t stop_cut = chars.size();
      // (Rust indexes past the front here and panics when stop > the
      // token's length; stopping at the front instead is the only sane
      // reading.)
      for (std::size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        const std::size_t index = chars.size() - i - 1;
        if (chars[index] != content_) break;
        stop_cut = index;
      }
      std::string out;
      for (std::size_t i = start_cut; i < stop_cut; ++i) AppendUtf8(chars[i], &out);
      t = std::move(out);
    }
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      std::string out;
      for (const Span& s : pattern_->FindMatches(t))
        out += s.is_match ? std::string_view(content_)
                          : std::string_view(t).substr(s.begin, s.end - s.begin);
      t = std::move(out);
    }
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      if (i != 0) {
        // replacen(prefix, "", 1) after a starts_with check: the first
        // occurrence is the prefix itself.
        if (t.rfind(prefix_, 0) == 0)
          t.erase(0, prefix_.size());
        else
          t = " " + t;
      }
      if (cleanup_) t = Cleanup(t);
    }
  }

 private:
  static void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
    std::string out;
    for (std::size_t at = 0;;) {
      const std::size_t hit = s->find(from, at);
      if (hit == std::string::npos) {
        out.append(*s, at);
        break;
      }
      out.append(*s, at, hit - at);
      out += to;
      at = hit + from.size();
    }
    *s = std::move(out);
  }
  // decoders/wordpiece.rs cleanup().
  static std::string Cleanup(std::string s) {
    static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) ReplaceAll(&s, from, to);
    return s;
  }
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      if (suffix_.empty()) continue;  // Rust's str::replace("") would interleave; no file has it
      const std::string replacement = i + 1 == tokens->size() ? "" : " ";
      std::string out;
      for (std::size_t at = 0;;) {
        const std::size_t hit = t.find(suffix_, at);
        if (hit == std::string::npos) {
          out.append(t, at);
          break;
        }
        out.append(t, at, hit - at);
        out += replacement;
        at = hit + suffix_.size();
      }
      t = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> decoders)
      : decoders_(std::move(decoders)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& d : decoders_) d->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> decoders_;
};

// A JSON string holding exactly one character (Rust `char` fields).
Status OneChar(const json& j, const char* key, const char* what, char32_t* out) {
  if (!j.contains(key) || !j[key].is_string())
    return Status::InvalidArgument(std::string(what) + ": missing '" + key + "'");
  const std::vector<char32_t> cps = DecodeUtf8(j[key].get<std::string>());
  if (cps.size() != 1)
    return Status::InvalidArgument(std::string(what) + ": '" + key + "' must be one character");
  *out = cps[0];
  return Status::Ok();
}

Status MakeDecoderImpl(const json& j, std::unique_ptr<Decoder>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::InvalidArgument("decoder without a type: " + j.dump().substr(0, 80));
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") {
    *out = std::make_unique<ByteLevelDecoder>();
  } else if (type == "Metaspace") {
    char32_t replacement;
    if (Status s = OneChar(j, "replacement", "Metaspace decoder", &replacement); !s.ok()) return s;
    const std::string scheme = j.value("prepend_scheme", "always");
    if (scheme != "always" && scheme != "first" && scheme != "never")
      return Status::InvalidArgument("Metaspace decoder: prepend_scheme '" + scheme +
                                     "' is not supported");
    // As the Rust deserializer: add_prefix_space false must agree with "never".
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
        !j["add_prefix_space"].get<bool>() && scheme != "never")
      return Status::InvalidArgument(
          "Metaspace decoder: add_prefix_space does not match declared prepend_scheme");
    const bool never = scheme == "never" ||
                       (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
                        !j["add_prefix_space"].get<bool>());
    *out = std::make_unique<MetaspaceDecoder>(replacement, !never);
  } else if (type == "ByteFallback") {
    *out = std::make_unique<ByteFallbackDecoder>();
  } else if (type == "Fuse") {
    *out = std::make_unique<FuseDecoder>();
  } else if (type == "Strip") {
    char32_t content;
    if (Status s = OneChar(j, "content", "Strip decoder", &content); !s.ok()) return s;
    *out = std::make_unique<StripDecoder>(content, j.value("start", std::size_t{0}),
                                          j.value("stop", std::size_t{0}));
  } else if (type == "Replace") {
    if (!j.contains("pattern") || !j["pattern"].is_object() || !j.contains("content"))
      return Status::InvalidArgument("Replace decoder: missing pattern/content");
    const json& p = j["pattern"];
    std::unique_ptr<Regex> re;
    Status s = p.contains("String") ? Regex::CompileLiteral(p["String"].get<std::string>(), &re)
               : p.contains("Regex")
                   ? Regex::Compile(p["Regex"].get<std::string>(), &re)
                   : Status::InvalidArgument("Replace decoder: pattern must be String or Regex");
    if (!s.ok()) return s;
    *out = std::make_unique<ReplaceDecoder>(std::move(re), j["content"].get<std::string>());
  } else if (type == "WordPiece") {
    *out = std::make_unique<WordPieceDecoder>(j.value("prefix", "##"), j.value("cleanup", true));
  } else if (type == "BPEDecoder") {
    *out = std::make_unique<BpeSuffixDecoder>(j.value("suffix", "</w>"));
  } else if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      return Status::InvalidArgument("Sequence decoder: missing decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& each : j["decoders"]) {
      std::unique_ptr<Decoder> d;
      if (Status st = MakeDecoderImpl(each, &d); !st.ok()) return st;
      parts.push_back(std::move(d));
    }
    *out = std::make_unique<SequenceDecoder>(std::move(parts));
  } else {
    return Status::InvalidArgument("decoder '" + type + "' is not supported");
  }
  return Status::Ok();
}

}  // namespace

Status MakeDecoder(const json& j, std::unique_ptr<Decoder>* out) {
  try {
    return MakeDecoderImpl(j, out);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("decoder: ") + e.what());
  }
}

}  // namespace sightline::hf
