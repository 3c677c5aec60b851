#include "lexer.h"

#include <cctype>

#include "pystr.h"

namespace sightline::jinja {

namespace {

bool Space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's str.rstrip() (Unicode whitespace).
std::string RStrip(const std::string& s) {
  std::vector<char32_t> cps = DecodeUtf8(s);
  while (!cps.empty() && IsSpace(cps.back())) cps.pop_back();
  return EncodeUtf8(cps);
}

bool AllSpace(std::string_view s) {
  if (s.empty()) return false;  // Jinja2 matches \s+
  for (char32_t c : DecodeUtf8(s))
    if (!IsSpace(c)) return false;
  return true;
}

// Jinja2 normalizes every newline to "\n" and, without
// keep_trailing_newline, drops one final newline.
std::string Normalize(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Python's unicode-escape decoding of a string literal's body, as Jinja2
// applies it; an unknown escape stays as written.
bool Unescape(std::string_view body, std::string* out) {
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      *out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](int n) -> bool {
      std::uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (i + 1 >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + 1])))
          return false;
        const char h = body[++i];
        v = v * 16 + static_cast<std::uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      AppendUtf8(static_cast<char32_t>(v), out);
      return true;
    };
    switch (c) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        *out += c;
        break;
      case 'n':
        *out += '\n';
        break;
      case 't':
        *out += '\t';
        break;
      case 'r':
        *out += '\r';
        break;
      case 'a':
        *out += '\a';
        break;
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'v':
        *out += '\v';
        break;
      case 'x':
        if (!hex(2)) return false;
        break;
      case 'u':
        if (!hex(4)) return false;
        break;
      case 'U':
        if (!hex(8)) return false;
        break;
      default:
        if (c >= '0' && c <= '7') {
          std::uint32_t v = static_cast<std::uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k)
            v = v * 8 + static_cast<std::uint32_t>(body[++i] - '0');
          AppendUtf8(static_cast<char32_t>(v), out);
        } else if (c == 'N') {
          return false;  // \N{NAME}: no name table here
        } else {
          *out += '\\';
          *out += c;
        }
    }
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  Status Run(std::vector<Token>* out) {
    out_ = out;
    while (pos_ < s_.size()) {
      std::size_t start = std::string::npos;
      for (std::size_t p = s_.find('{', pos_); p != std::string::npos; p = s_.find('{', p + 1))
        if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) {
          start = p;
          break;
        }
      if (start == std::string::npos) {
        Emit(Token::Type::kData, s_.substr(pos_));
        break;
      }
      const char kind = s_[start + 1];
      const char sign = start + 2 < s_.size() && (s_[start + 2] == '-' || s_[start + 2] == '+')
                            ? s_[start + 2]
                            : 0;
      std::string text = s_.substr(pos_, start - pos_);
      text = StripBefore(text, sign, kind != '{');
      Emit(Token::Type::kData, text);
      pos_ = start + 2 + (sign ? 1 : 0);
      line_starting_ = false;
      Status s;
      if (kind == '#')
        s = Comment();
      else if (kind == '%' && Raw(&s))
        ;
      else
        s = Tag(kind == '%');
      if (!s.ok()) return s;
    }
    out_->push_back({Token::Type::kEof, "", line_});
    return Status::Ok();
  }

 private:
  void Emit(Token::Type t, std::string text) {
    if (t == Token::Type::kData && text.empty()) return;
    out_->push_back({t, std::move(text), Line()});
  }

  // The line of pos_ in the source, counted incrementally.
  int Line() {
    for (; counted_ < pos_ && counted_ < s_.size(); ++counted_) line_ += s_[counted_] == '\n';
    return line_;
  }

  // The whitespace rules for the text before a tag opened with `sign`.
  std::string StripBefore(const std::string& text, char sign, bool block_or_comment) const {
    if (sign == '-') return RStrip(text);
    if (sign == '+' || !block_or_comment) return text;
    const std::size_t nl = text.rfind('\n');
    const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && AllSpace(std::string_view(text).substr(l_pos)))
      return text.substr(0, l_pos);
    return text;
  }

  // After an end delimiter at pos_ (already past it): `-` strips all
  // whitespace, `+` nothing, else trim_blocks drops one newline.
  void After(char sign, bool trim) {
    if (sign == '-') {
      while (pos_ < s_.size() && Space(s_[pos_])) ++pos_;
    } else if (sign != '+' && trim && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  Status Comment() {
    const std::size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) return Error("missing end of comment tag");
    const char sign = end > pos_ && (s_[end - 1] == '-' || s_[end - 1] == '+') ? s_[end - 1] : 0;
    pos_ = end + 2;
    After(sign, true);
    return Status::Ok();
  }

  // `{% raw %}...{% endraw %}`: the text between is data, unparsed.
  bool Raw(Status* status) {
    std::size_t p = pos_;
    while (p < s_.size() && Space(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < s_.size() && Space(s_[p])) ++p;
    char sign = 0;
    if (s_.compare(p, 3, "-%}") == 0) {
      sign = '-';
      p += 3;
    } else if (s_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    pos_ = p;
    After(sign, false);
    for (std::size_t q = s_.find("{%", pos_); q != std::string::npos; q = s_.find("{%", q + 1)) {
      std::size_t r = q + 2;
      const char open = r < s_.size() && (s_[r] == '-' || s_[r] == '+') ? s_[r] : 0;
      if (open) ++r;
      while (r < s_.size() && Space(s_[r])) ++r;
      if (s_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < s_.size() && Space(s_[r])) ++r;
      char close = 0;
      if (s_.compare(r, 3, "-%}") == 0 || s_.compare(r, 3, "+%}") == 0) {
        close = s_[r];
        r += 3;
      } else if (s_.compare(r, 2, "%}") == 0) {
        r += 2;
      } else {
        continue;
      }
      Emit(Token::Type::kData, StripBefore(s_.substr(pos_, q - pos_), open, true));
      pos_ = r;
      After(close, true);
      return true;
    }
    *status = Error("missing end of raw directive");
    return true;
  }

  Status Tag(bool block) {
    Emit(block ? Token::Type::kBlockBegin : Token::Type::kVariableBegin, "");
    int depth = 0;
    const char close = block ? '%' : '}';
    while (true) {
      if (pos_ >= s_.size()) return Error(block ? "missing end of block tag" : "missing '}}'");
      if (depth == 0) {
        char sign = 0;
        std::size_t p = pos_;
        if (s_[p] == '-' || (block && s_[p] == '+')) sign = s_[p++];
        if (s_.compare(p, 2, std::string(1, close) + "}") == 0) {
          pos_ = p + 2;
          Emit(block ? Token::Type::kBlockEnd : Token::Type::kVariableEnd, "");
          After(sign, block);
          return Status::Ok();
        }
      }
      const char c = s_[pos_];
      if (Space(c)) {
        ++pos_;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        Number();
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = pos_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_'))
          ++e;
        Emit(Token::Type::kName, s_.substr(pos_, e - pos_));
        pos_ = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        std::size_t e = pos_ + 1;
        while (e < s_.size() && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
        if (e >= s_.size()) return Error("unexpected end of string");
        std::string value;
        if (!Unescape(std::string_view(s_).substr(pos_ + 1, e - pos_ - 1), &value))
          return Error("unsupported escape in string literal");
        Emit(Token::Type::kString, std::move(value));
        pos_ = e + 1;
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                   "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                   ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
      bool matched = false;
      for (const char* op : kOps) {
        const std::string o(op);
        if (s_.compare(pos_, o.size(), o) != 0) continue;
        if (o == "(" || o == "[" || o == "{") ++depth;
        if ((o == ")" || o == "]" || o == "}") && depth > 0) --depth;
        Emit(Token::Type::kOperator, o);
        pos_ += o.size();
        matched = true;
        break;
      }
      if (!matched) return Error(std::string("unexpected char '") + c + "'");
    }
  }

  void Number() {
    auto digits = [&](std::size_t p) {
      const std::size_t b = p;
      while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) ||
                               (s_[p] == '_' && p + 1 < s_.size() &&
                                std::isdigit(static_cast<unsigned char>(s_[p + 1])))))
        ++p;
      return p == b ? std::string::npos : p;
    };
    std::size_t e = digits(pos_);
    bool is_float = false;
    if (e < s_.size() && s_[e] == '.' && e + 1 < s_.size() &&
        std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      std::size_t p = e + 1;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (std::size_t q = digits(p); q != std::string::npos) {
        e = q;
        is_float = true;
      }
    }
    std::string text = s_.substr(pos_, e - pos_);
    std::erase(text, '_');
    Emit(is_float ? Token::Type::kFloat : Token::Type::kInteger, std::move(text));
    pos_ = e;
  }

  Status Error(const std::string& what) {
    return Status::InvalidArgument("template syntax error, line " + std::to_string(Line()) + ": " +
                                   what);
  }

  std::string s_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::size_t counted_ = 0;
  bool line_starting_ = true;
  std::vector<Token>* out_ = nullptr;
};

}  // namespace

Status Tokenize(std::string_view source, std::vector<Token>* out) {
  return Lexer(Normalize(source)).Run(out);
}

}  // namespace sightline::jinja
