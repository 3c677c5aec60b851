#include "hf/normalizers.h"

#include <nlohmann/json.hpp>

#include "hf/pre_tokenizers.h"
#include "hf/regex.h"
#include "hf/unicode.h"

namespace sightline::hf {
namespace {

using nlohmann::json;

Status Field(const json& j, const char* key, const std::string& what, const json** out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::InvalidArgument(what + ": missing '" + key + "'");
  *out = &*it;
  return Status::Ok();
}

Status BoolField(const json& j, const char* key, const std::string& what, bool* out) {
  const json* v = nullptr;
  if (Status s = Field(j, key, what, &v); !s.ok()) return s;
  if (!v->is_boolean()) return Status::InvalidArgument(what + ": '" + key + "' is not a boolean");
  *out = v->get<bool>();
  return Status::Ok();
}

Status StringField(const json& j, const char* key, const std::string& what, std::string* out) {
  const json* v = nullptr;
  if (Status s = Field(j, key, what, &v); !s.ok()) return s;
  if (!v->is_string()) return Status::InvalidArgument(what + ": '" + key + "' is not a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  std::string Normalize(std::string_view text) const override { return hf::Normalize(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override { return Lowercase(text); }
};

// NormalizedString::lrstrip: leading / trailing char::is_whitespace.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string_view text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        std::size_t next = begin;
        if (!IsWhitespace(NextCodepoint(text, &next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;  // back to the last character's lead byte
        while (start > begin && IsUtf8Continuation(static_cast<unsigned char>(text[start])))
          --start;
        std::size_t next = start;
        if (!IsWhitespace(NextCodepoint(text, &next))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (char32_t cp : DecodeUtf8(text))
      if (!IsCombiningMark(cp)) AppendUtf8(cp, &out);
    return out;
  }
};

// NormalizedString::replace: every match (empty ones included) -> content.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (const Span& s : regex_->FindMatches(text)) {
      if (s.is_match)
        out += content_;
      else
        out.append(text.substr(s.begin, s.end - s.begin));
    }
    return out;
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  std::string Normalize(std::string_view text) const override {
    if (text.empty()) return {};
    return prepend_ + std::string(text);
  }

 private:
  std::string prepend_;
};

// Every byte to the GPT-2 byte-level alphabet, as the ByteLevel pre-tokenizer.
class ByteLevelNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    const auto& alphabet = ByteLevelAlphabet();
    std::string out;
    for (char c : text) out += alphabet[static_cast<unsigned char>(c)];
    return out;
  }
};

// `tokenizers`' do_nmt: drops some control characters, maps some spaces.
class NmtNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    std::string out;
    for (char32_t c : DecodeUtf8(text)) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
          c == 0x8F || c == 0x9F)
        continue;
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
                         (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 ||
                         c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      AppendUtf8(space ? U' ' : c, &out);
    }
    return out;
  }
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> stages)
      : stages_(std::move(stages)) {}
  std::string Normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& stage : stages_) s = stage->Normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> stages_;
};

// The outermost normalizer: valid UTF-8 in, as Rust's &str guarantees.
class ValidUtf8Normalizer : public Normalizer {
 public:
  explicit ValidUtf8Normalizer(std::unique_ptr<Normalizer> inner) : inner_(std::move(inner)) {}
  std::string Normalize(std::string_view text) const override {
    return inner_->Normalize(LossyUtf8(text));
  }

 private:
  std::unique_ptr<Normalizer> inner_;
};

Status Build(const json& j, std::unique_ptr<Normalizer>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::InvalidArgument("normalizer without a 'type'");
  const std::string type = j["type"].get<std::string>();
  const std::string what = "normalizer '" + type + "'";
  if (type == "NFC") {
    out->reset(new UnicodeNormalizer(NormalForm::kNfc));
  } else if (type == "NFD") {
    out->reset(new UnicodeNormalizer(NormalForm::kNfd));
  } else if (type == "NFKC") {
    out->reset(new UnicodeNormalizer(NormalForm::kNfkc));
  } else if (type == "NFKD") {
    out->reset(new UnicodeNormalizer(NormalForm::kNfkd));
  } else if (type == "Lowercase") {
    out->reset(new LowercaseNormalizer);
  } else if (type == "StripAccents") {
    out->reset(new StripAccentsNormalizer);
  } else if (type == "ByteLevel") {
    out->reset(new ByteLevelNormalizer);
  } else if (type == "Nmt") {
    out->reset(new NmtNormalizer);
  } else if (type == "Strip") {
    bool left = false, right = false;
    if (Status s = BoolField(j, "strip_left", what, &left); !s.ok()) return s;
    if (Status s = BoolField(j, "strip_right", what, &right); !s.ok()) return s;
    out->reset(new StripNormalizer(left, right));
  } else if (type == "Prepend") {
    std::string prepend;
    if (Status s = StringField(j, "prepend", what, &prepend); !s.ok()) return s;
    out->reset(new PrependNormalizer(std::move(prepend)));
  } else if (type == "Replace") {
    std::string content;
    if (Status s = StringField(j, "content", what, &content); !s.ok()) return s;
    const json* pattern = nullptr;
    if (Status s = Field(j, "pattern", what, &pattern); !s.ok()) return s;
    std::unique_ptr<Regex> regex;
    if (pattern->is_object() && pattern->size() == 1 && pattern->contains("String") &&
        (*pattern)["String"].is_string()) {
      if (Status s = Regex::CompileLiteral((*pattern)["String"].get<std::string>(), &regex);
          !s.ok())
        return Status::InvalidArgument(what + ": " + s.message());
    } else if (pattern->is_object() && pattern->size() == 1 && pattern->contains("Regex") &&
               (*pattern)["Regex"].is_string()) {
      if (Status s = Regex::Compile((*pattern)["Regex"].get<std::string>(), &regex); !s.ok())
        return Status::InvalidArgument(what + ": " + s.message());
    } else {
      return Status::InvalidArgument(what +
                                     ": 'pattern' is neither {\"String\": ...} nor "
                                     "{\"Regex\": ...}");
    }
    out->reset(new ReplaceNormalizer(std::move(regex), std::move(content)));
  } else if (type == "Sequence") {
    const json* list = nullptr;
    if (Status s = Field(j, "normalizers", what, &list); !s.ok()) return s;
    if (!list->is_array()) return Status::InvalidArgument(what + ": 'normalizers' is not a list");
    std::vector<std::unique_ptr<Normalizer>> stages;
    for (const json& item : *list) {
      std::unique_ptr<Normalizer> stage;
      if (Status s = Build(item, &stage); !s.ok()) return s;
      stages.push_back(std::move(stage));
    }
    out->reset(new SequenceNormalizer(std::move(stages)));
  } else {
    // Precompiled (a SentencePiece charsmap), BertNormalizer and anything new.
    return Status::InvalidArgument(what + " is not supported");
  }
  return Status::Ok();
}

}  // namespace

Status MakeNormalizer(const nlohmann::json& j, std::unique_ptr<Normalizer>* out) {
  std::unique_ptr<Normalizer> inner;
  if (Status s = Build(j, &inner); !s.ok()) return s;
  out->reset(new ValidUtf8Normalizer(std::move(inner)));
  return Status::Ok();
}

}  // namespace sightline::hf
