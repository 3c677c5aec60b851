#include "hf/pre_tokenizers.h"

#include <nlohmann/json.hpp>

#include "hf/regex.h"
#include "hf/unicode.h"

namespace sightline::hf {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A piece and whether it begins at the input's original offset 0.
struct Piece {
  std::string text;
  bool starts_input;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual void Run(std::vector<Piece>* pieces) const = 0;
};

// PreTokenizedString::split: every piece through `split`, empty results dropped.
template <typename F>
void SplitEach(std::vector<Piece>* pieces, F split) {
  std::vector<Piece> out;
  out.reserve(pieces->size());
  for (Piece& p : *pieces)
    for (Piece& q : split(p))
      if (!q.text.empty()) out.push_back(std::move(q));
  *pieces = std::move(out);
}

std::vector<Piece> Slice(const Piece& p, const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<Piece> out;
  for (const auto& [b, e] : SplitSpans(spans, behavior))
    out.push_back({p.text.substr(b, e - b), p.starts_input && b == 0});
  return out;
}

class ByteLevelStage : public Stage {
 public:
  ByteLevelStage(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](Piece& p) {
      // NormalizedString::prepend does nothing to an empty string.
      if (add_prefix_space_ && !p.text.empty() && p.text[0] != ' ') p.text.insert(0, " ");
      if (!regex_) return std::vector<Piece>{std::move(p)};
      return Slice(p, regex_->FindMatches(p.text), SplitBehavior::kIsolated);
    });
    const auto& alphabet = ByteLevelAlphabet();
    for (Piece& p : *pieces) {
      std::string mapped;
      for (char c : p.text) mapped += alphabet[static_cast<unsigned char>(c)];
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // null: use_regex false
};

class SplitStage : public Stage {
 public:
  SplitStage(std::unique_ptr<Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](const Piece& p) {
      std::vector<Span> spans = regex_->FindMatches(p.text);
      if (invert_) Invert(&spans);
      return Slice(p, spans, behavior_);
    });
  }

 private:
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

// A split on a character predicate (Digits, Punctuation, WhitespaceSplit...).
class PredicateStage : public Stage {
 public:
  PredicateStage(bool (*predicate)(char32_t), SplitBehavior behavior)
      : predicate_(predicate), behavior_(behavior) {}
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](const Piece& p) {
      return Slice(p, FindMatchesIf(p.text, predicate_), behavior_);
    });
  }

 private:
  bool (*predicate_)(char32_t);
  SplitBehavior behavior_;
};

class CharDelimiterStage : public Stage {
 public:
  explicit CharDelimiterStage(char32_t delimiter) : delimiter_(delimiter) {}
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](const Piece& p) {
      return Slice(p, FindMatchesOf(p.text, delimiter_), SplitBehavior::kRemoved);
    });
  }

 private:
  char32_t delimiter_;
};

// Whitespace: Rust regex `\w+|[^\w\s]+`, inverted, delimiters removed; that
// is, maximal runs of word characters and maximal runs of other
// non-whitespace characters. Run here on the predicates rather than on
// Oniguruma because `tokenizers` runs it on the regex crate, whose Unicode
// version (16.0) is not Oniguruma's (15.0).
class WhitespaceStage : public Stage {
 public:
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [](const Piece& p) {
      std::vector<Piece> out;
      int run_class = -1;  // 0 word, 1 other, -1 none (whitespace)
      std::size_t run_begin = 0;
      for (std::size_t i = 0; i <= p.text.size();) {
        const std::size_t at = i;
        int cls = -1;
        if (i < p.text.size()) {
          const char32_t cp = NextCodepoint(p.text, &i);
          cls = IsRegexWordChar(cp) ? 0 : IsWhitespace(cp) ? -1 : 1;
        } else {
          ++i;
        }
        if (cls == run_class && at < p.text.size()) continue;
        if (run_class >= 0)
          out.push_back(
              {p.text.substr(run_begin, at - run_begin), p.starts_input && run_begin == 0});
        run_class = cls;
        run_begin = at;
      }
      return out;
    });
  }
};

class FixedLengthStage : public Stage {
 public:
  explicit FixedLengthStage(std::size_t length) : length_(length) {}
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](const Piece& p) {
      std::vector<Piece> out;
      std::size_t begin = 0, count = 0;
      for (std::size_t i = 0; i < p.text.size();) {
        NextCodepoint(p.text, &i);
        if (++count == length_ || i == p.text.size()) {
          out.push_back({p.text.substr(begin, i - begin), p.starts_input && begin == 0});
          begin = i;
          count = 0;
        }
      }
      return out;
    });
  }

 private:
  std::size_t length_;
};

enum class PrependScheme { kFirst, kAlways, kNever };

class MetaspaceStage : public Stage {
 public:
  MetaspaceStage(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    AppendUtf8(replacement, &rep_);
  }
  void Run(std::vector<Piece>* pieces) const override {
    SplitEach(pieces, [&](Piece& p) {
      std::string text;
      for (char c : p.text) {
        if (c == ' ')
          text += rep_;
        else
          text.push_back(c);
      }
      const bool starts_with_rep = text.compare(0, rep_.size(), rep_) == 0;
      if (!text.empty() && !starts_with_rep &&
          (scheme_ == PrependScheme::kAlways ||
           (scheme_ == PrependScheme::kFirst && p.starts_input)))
        text.insert(0, rep_);
      p.text = std::move(text);
      if (!split_) return std::vector<Piece>{std::move(p)};
      return Slice(p, FindMatchesOf(p.text, replacement_), SplitBehavior::kMergedWithNext);
    });
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class SequenceStage : public Stage {
 public:
  explicit SequenceStage(std::vector<std::unique_ptr<Stage>> stages) : stages_(std::move(stages)) {}
  void Run(std::vector<Piece>* pieces) const override {
    for (const auto& stage : stages_) stage->Run(pieces);
  }

 private:
  std::vector<std::unique_ptr<Stage>> stages_;
};

// The PreTokenizer of components.h over the stages.
class PreTokenizerImpl : public PreTokenizer {
 public:
  explicit PreTokenizerImpl(std::unique_ptr<Stage> stage) : stage_(std::move(stage)) {}
  void PreTokenize(std::vector<std::string>* pieces, bool starts_input) const override {
    std::vector<Piece> work;
    work.reserve(pieces->size());
    for (std::string& s : *pieces) {
      // Valid UTF-8, as Rust's &str guarantees. An empty piece stays until a
      // stage splits (an empty Sequence keeps it, as `tokenizers` does).
      work.push_back({LossyUtf8(s), starts_input});
      starts_input = false;
    }
    stage_->Run(&work);
    pieces->clear();
    for (Piece& p : work) pieces->push_back(std::move(p.text));
  }

 private:
  std::unique_ptr<Stage> stage_;
};

Status Field(const json& j, const char* key, const std::string& what, const json** out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::InvalidArgument(what + ": missing '" + key + "'");
  *out = &*it;
  return Status::Ok();
}

// A boolean field; `fallback` where `tokenizers` has a serde default, else required.
Status BoolField(const json& j, const char* key, const std::string& what, const bool* fallback,
                 bool* out) {
  if (!j.contains(key) && fallback) {
    *out = *fallback;
    return Status::Ok();
  }
  const json* v = nullptr;
  if (Status s = Field(j, key, what, &v); !s.ok()) return s;
  if (!v->is_boolean()) return Status::InvalidArgument(what + ": '" + key + "' is not a boolean");
  *out = v->get<bool>();
  return Status::Ok();
}

// A field holding exactly one character (Rust `char`).
Status CharField(const json& j, const char* key, const std::string& what, char32_t* out) {
  const json* v = nullptr;
  if (Status s = Field(j, key, what, &v); !s.ok()) return s;
  const std::vector<char32_t> cps =
      v->is_string() ? DecodeUtf8(v->get<std::string>()) : std::vector<char32_t>{};
  if (cps.size() != 1)
    return Status::InvalidArgument(what + ": '" + key + "' is not a single character");
  *out = cps[0];
  return Status::Ok();
}

Status BehaviorField(const json& j, const std::string& what, bool required, SplitBehavior* out) {
  if (!j.contains("behavior") && !required) return Status::Ok();
  const json* v = nullptr;
  if (Status s = Field(j, "behavior", what, &v); !s.ok()) return s;
  if (!v->is_string()) return Status::InvalidArgument(what + ": 'behavior' is not a string");
  if (Status s = ParseSplitBehavior(v->get<std::string>(), out); !s.ok())
    return Status::InvalidArgument(what + ": " + s.message());
  return Status::Ok();
}

Status PatternField(const json& j, const std::string& what, std::unique_ptr<Regex>* out) {
  const json* pattern = nullptr;
  if (Status s = Field(j, "pattern", what, &pattern); !s.ok()) return s;
  Status s = Status::InvalidArgument(what +
                                     ": 'pattern' is neither {\"String\": ...} nor "
                                     "{\"Regex\": ...}");
  if (pattern->is_object() && pattern->size() == 1) {
    if (pattern->contains("String") && (*pattern)["String"].is_string())
      s = Regex::CompileLiteral((*pattern)["String"].get<std::string>(), out);
    else if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
      s = Regex::Compile((*pattern)["Regex"].get<std::string>(), out);
    if (!s.ok() && s.message().rfind("regex", 0) == 0)
      s = Status::InvalidArgument(what + ": " + s.message());
  }
  return s;
}

Status Build(const json& j, std::unique_ptr<Stage>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::InvalidArgument("pre-tokenizer without a 'type'");
  const std::string type = j["type"].get<std::string>();
  const std::string what = "pre-tokenizer '" + type + "'";
  constexpr bool kTrue = true, kFalse = false;
  if (type == "ByteLevel") {
    bool add_prefix_space = false, use_regex = true;
    if (Status s = BoolField(j, "add_prefix_space", what, nullptr, &add_prefix_space); !s.ok())
      return s;
    if (Status s = BoolField(j, "use_regex", what, &kTrue, &use_regex); !s.ok()) return s;
    // trim_offsets only moves offsets, which are not tracked here.
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      if (Status s = Regex::Compile(kGpt2Pattern, &regex); !s.ok()) return s;
    }
    out->reset(new ByteLevelStage(add_prefix_space, std::move(regex)));
  } else if (type == "Split") {
    std::unique_ptr<Regex> regex;
    SplitBehavior behavior{};
    bool invert = false;
    if (Status s = PatternField(j, what, &regex); !s.ok()) return s;
    if (Status s = BehaviorField(j, what, true, &behavior); !s.ok()) return s;
    if (Status s = BoolField(j, "invert", what, nullptr, &invert); !s.ok()) return s;
    out->reset(new SplitStage(std::move(regex), behavior, invert));
  } else if (type == "Metaspace") {
    char32_t replacement = 0;
    if (Status s = CharField(j, "replacement", what, &replacement); !s.ok()) return s;
    PrependScheme scheme = PrependScheme::kAlways;  // serde default
    if (j.contains("prepend_scheme")) {
      const json& v = j["prepend_scheme"];
      const std::string name = v.is_string() ? v.get<std::string>() : "";
      if (name == "first")
        scheme = PrependScheme::kFirst;
      else if (name == "always")
        scheme = PrependScheme::kAlways;
      else if (name == "never")
        scheme = PrependScheme::kNever;
      else
        return Status::InvalidArgument(what + ": prepend_scheme '" + v.dump() +
                                       "' is not supported");
    }
    // Legacy files: add_prefix_space false means "never" and must not
    // contradict a declared scheme; true changes nothing.
    if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null()) {
      bool add = true;
      if (Status s = BoolField(j, "add_prefix_space", what, nullptr, &add); !s.ok()) return s;
      if (!add) {
        if (scheme != PrependScheme::kNever)
          return Status::InvalidArgument(
              what + ": add_prefix_space does not match declared prepend_scheme");
        scheme = PrependScheme::kNever;
      }
    }
    bool split = true;
    if (j.contains("split") && !j["split"].is_null()) {
      if (Status s = BoolField(j, "split", what, &kTrue, &split); !s.ok()) return s;
    }
    out->reset(new MetaspaceStage(replacement, scheme, split));
  } else if (type == "Digits") {
    bool individual = false;
    if (Status s = BoolField(j, "individual_digits", what, &kFalse, &individual); !s.ok()) return s;
    out->reset(new PredicateStage(
        IsNumeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  } else if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::kIsolated;  // serde default
    if (Status s = BehaviorField(j, what, false, &behavior); !s.ok()) return s;
    out->reset(new PredicateStage(IsPunctuation, behavior));
  } else if (type == "Whitespace") {
    out->reset(new WhitespaceStage);
  } else if (type == "WhitespaceSplit") {
    out->reset(new PredicateStage(IsWhitespace, SplitBehavior::kRemoved));
  } else if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<Stage>> stages;
    stages.emplace_back(new PredicateStage(IsWhitespace, SplitBehavior::kRemoved));
    stages.emplace_back(new PredicateStage(IsPunctuation, SplitBehavior::kIsolated));
    out->reset(new SequenceStage(std::move(stages)));
  } else if (type == "CharDelimiterSplit") {
    char32_t delimiter = 0;
    if (Status s = CharField(j, "delimiter", what, &delimiter); !s.ok()) return s;
    out->reset(new CharDelimiterStage(delimiter));
  } else if (type == "FixedLength") {
    std::size_t length = 5;  // serde default
    if (j.contains("length")) {
      if (!j["length"].is_number_unsigned() || j["length"].get<std::size_t>() == 0)
        return Status::InvalidArgument(what + ": 'length' must be a positive integer");
      length = j["length"].get<std::size_t>();
    }
    out->reset(new FixedLengthStage(length));
  } else if (type == "Sequence") {
    const json* list = nullptr;
    if (Status s = Field(j, "pretokenizers", what, &list); !s.ok()) return s;
    if (!list->is_array()) return Status::InvalidArgument(what + ": 'pretokenizers' is not a list");
    std::vector<std::unique_ptr<Stage>> stages;
    for (const json& item : *list) {
      std::unique_ptr<Stage> stage;
      if (Status s = Build(item, &stage); !s.ok()) return s;
      stages.push_back(std::move(stage));
    }
    out->reset(new SequenceStage(std::move(stages)));
  } else {
    // UnicodeScripts (script tables of its own) and anything new.
    return Status::InvalidArgument(what + " is not supported");
  }
  return Status::Ok();
}

}  // namespace

const std::array<std::string, 256>& ByteLevelAlphabet() {
  static const std::array<std::string, 256> alphabet = [] {
    std::array<std::string, 256> a;
    char32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      AppendUtf8(printable ? static_cast<char32_t>(b) : 0x100 + extra++,
                 &a[static_cast<std::size_t>(b)]);
    }
    return a;
  }();
  return alphabet;
}

namespace {

// `*split_seen`: an earlier stage may have split. Returns whether a
// Metaspace "first" comes after one.
bool FirstAfterSplit(const json& j, bool* split_seen) {
  if (!j.is_object()) return false;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    const auto it = j.find("pretokenizers");
    if (it != j.end() && it->is_array())
      for (const json& item : *it)
        if (FirstAfterSplit(item, split_seen)) return true;
    return false;
  }
  if (type == "Metaspace") {
    const bool first = j.value("prepend_scheme", "") == "first";
    if (first && *split_seen) return true;
    if (!j.contains("split") || j["split"] != false) *split_seen = true;
    return false;
  }
  if (type == "ByteLevel" && j.contains("use_regex") && j["use_regex"] == false) return false;
  *split_seen = true;
  return false;
}

}  // namespace

bool MetaspaceFirstAfterSplit(const nlohmann::json& j) {
  bool split_seen = false;
  return FirstAfterSplit(j, &split_seen);
}

Status MakePreTokenizer(const nlohmann::json& j, std::unique_ptr<PreTokenizer>* out) {
  std::unique_ptr<Stage> stage;
  if (Status s = Build(j, &stage); !s.ok()) return s;
  out->reset(new PreTokenizerImpl(std::move(stage)));
  return Status::Ok();
}

}  // namespace sightline::hf
