#include "hf/regex.h"

#include <oniguruma.h>

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <mutex>

#include "hf/unicode.h"

namespace sightline::hf {
namespace {

// Oniguruma keeps process-wide encoding tables that onig_initialize sets up
// and onig_new reads; it is not safe to run concurrently, so regexes are
// compiled under one lock (compiling happens at tokenizer load, searches run
// unlocked: a compiled regex_t is read-only during onig_search).
std::mutex& CompileMutex() {
  static std::mutex mu;
  return mu;
}

void InitializeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

Ranges Coalesce(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

// The code points of each General_Category, and of \w, as of Unicode 16.0:
// built once (immutable afterwards), surrogates left out (no UTF-8 text
// holds them, and Oniguruma refuses them in a class).
struct ClassTables {
  std::array<Ranges, 30> by_category;
  Ranges word;
};

const ClassTables& Tables() {
  static const ClassTables tables = [] {
    ClassTables t;
    auto add = [](Ranges* r, char32_t cp) {
      if (!r->empty() && r->back().second + 1 == cp)
        r->back().second = cp;
      else
        r->emplace_back(cp, cp);
    };
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const int c = GeneralCategory(cp);
      if (c >= 0 && c < 30) add(&t.by_category[static_cast<std::size_t>(c)], cp);
      if (IsOnigWordChar(cp)) add(&t.word, cp);
    }
    return t;
  }();
  return tables;
}

// Oniguruma's names of the General_Category values and groups (matched
// ignoring case, spaces, '-' and '_', as Oniguruma does) -> utf8proc
// categories. Other property names (scripts, ...) are left to Oniguruma.
bool CategoriesOf(std::string_view raw, std::vector<int>* out) {
  std::string name;
  for (char c : raw)
    if (c != ' ' && c != '_' && c != '-') name.push_back(static_cast<char>(std::tolower(c)));
  static constexpr struct {
    const char* short_name;
    const char* long_name;
    int first, last;  // utf8proc_category_t, inclusive
  } kNames[] = {
      {"l", "letter", UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LO},
      {"lc", "casedletter", UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LT},
      {"lu", "uppercaseletter", UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LU},
      {"ll", "lowercaseletter", UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LL},
      {"lt", "titlecaseletter", UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LT},
      {"lm", "modifierletter", UTF8PROC_CATEGORY_LM, UTF8PROC_CATEGORY_LM},
      {"lo", "otherletter", UTF8PROC_CATEGORY_LO, UTF8PROC_CATEGORY_LO},
      {"m", "mark", UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_ME},
      {"mn", "nonspacingmark", UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_MN},
      {"mc", "spacingmark", UTF8PROC_CATEGORY_MC, UTF8PROC_CATEGORY_MC},
      {"me", "enclosingmark", UTF8PROC_CATEGORY_ME, UTF8PROC_CATEGORY_ME},
      {"n", "number", UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NO},
      {"nd", "decimalnumber", UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_ND},
      {"nl", "letternumber", UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NL},
      {"no", "othernumber", UTF8PROC_CATEGORY_NO, UTF8PROC_CATEGORY_NO},
      {"p", "punctuation", UTF8PROC_CATEGORY_PC, UTF8PROC_CATEGORY_PO},
      {"pc", "connectorpunctuation", UTF8PROC_CATEGORY_PC, UTF8PROC_CATEGORY_PC},
      {"pd", "dashpunctuation", UTF8PROC_CATEGORY_PD, UTF8PROC_CATEGORY_PD},
      {"ps", "openpunctuation", UTF8PROC_CATEGORY_PS, UTF8PROC_CATEGORY_PS},
      {"pe", "closepunctuation", UTF8PROC_CATEGORY_PE, UTF8PROC_CATEGORY_PE},
      {"pi", "initialpunctuation", UTF8PROC_CATEGORY_PI, UTF8PROC_CATEGORY_PI},
      {"pf", "finalpunctuation", UTF8PROC_CATEGORY_PF, UTF8PROC_CATEGORY_PF},
      {"po", "otherpunctuation", UTF8PROC_CATEGORY_PO, UTF8PROC_CATEGORY_PO},
      {"s", "symbol", UTF8PROC_CATEGORY_SM, UTF8PROC_CATEGORY_SO},
      {"sm", "mathsymbol", UTF8PROC_CATEGORY_SM, UTF8PROC_CATEGORY_SM},
      {"sc", "currencysymbol", UTF8PROC_CATEGORY_SC, UTF8PROC_CATEGORY_SC},
      {"sk", "modifiersymbol", UTF8PROC_CATEGORY_SK, UTF8PROC_CATEGORY_SK},
      {"so", "othersymbol", UTF8PROC_CATEGORY_SO, UTF8PROC_CATEGORY_SO},
      {"z", "separator", UTF8PROC_CATEGORY_ZS, UTF8PROC_CATEGORY_ZP},
      {"zs", "spaceseparator", UTF8PROC_CATEGORY_ZS, UTF8PROC_CATEGORY_ZS},
      {"zl", "lineseparator", UTF8PROC_CATEGORY_ZL, UTF8PROC_CATEGORY_ZL},
      {"zp", "paragraphseparator", UTF8PROC_CATEGORY_ZP, UTF8PROC_CATEGORY_ZP},
      {"cc", "control", UTF8PROC_CATEGORY_CC, UTF8PROC_CATEGORY_CC},
      {"cf", "format", UTF8PROC_CATEGORY_CF, UTF8PROC_CATEGORY_CF},
      {"co", "privateuse", UTF8PROC_CATEGORY_CO, UTF8PROC_CATEGORY_CO},
      {"cn", "unassigned", UTF8PROC_CATEGORY_CN, UTF8PROC_CATEGORY_CN},
  };
  for (const auto& n : kNames) {
    if (name != n.short_name && name != n.long_name) continue;
    for (int c = n.first; c <= n.last; ++c) out->push_back(c);
    return true;
  }
  if (name == "c" || name == "other") {  // Cc Cf Cs Co Cn
    *out = {UTF8PROC_CATEGORY_CC, UTF8PROC_CATEGORY_CF, UTF8PROC_CATEGORY_CO, UTF8PROC_CATEGORY_CN};
    return true;
  }
  return false;
}

void AppendClass(const Ranges& ranges, bool negated, std::string* out) {
  auto hex = [](char32_t c) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(c));
    return std::string(buf);
  };
  *out += negated ? "[^" : "[";
  for (const auto& [a, b] : ranges) {
    *out += hex(a);
    if (b != a) *out += "-" + hex(b);
  }
  *out += "]";
}

// Debian's Oniguruma (6.9.8) has Unicode 14.0 tables, the one `tokenizers`
// bundles (6.9.10) 16.0: a Kawi letter or a Nag Mundari digit would not be
// \p{L} / \p{N} here. So the version-dependent classes are spelled out as
// Unicode 16.0 code point ranges before Oniguruma sees the pattern:
// \p{General_Category}, \P{..}, \p{^..}, \d, \D, \w, \W (as a nested class
// inside a bracket expression, which Oniguruma's syntax allows), and \b, \B
// as lookarounds on that \w. Scripts and other properties, POSIX brackets
// and case folding stay Oniguruma 6.9.8's.
std::string SpellOutClasses(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  int depth = 0;             // bracket expressions open
  bool class_start = false;  // just after '[' or '[^': a ']' is literal
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      class_start = false;
      if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i + 3);
        if (close != std::string_view::npos) {
          std::string_view name = p.substr(i + 3, close - i - 3);
          bool negated = e == 'P';
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.remove_prefix(1);
          }
          std::vector<int> categories;
          if (CategoriesOf(name, &categories)) {
            Ranges r;
            for (int cat : categories) {
              const Ranges& part = Tables().by_category[static_cast<std::size_t>(cat)];
              r.insert(r.end(), part.begin(), part.end());
            }
            AppendClass(Coalesce(std::move(r)), negated, &out);
            i = close;
            continue;
          }
        }
      } else if (e == 'd' || e == 'D') {
        AppendClass(Tables().by_category[UTF8PROC_CATEGORY_ND], e == 'D', &out);
        ++i;
        continue;
      } else if ((e == 'b' || e == 'B') && depth == 0) {
        // A word boundary is where \w holds on exactly one side.
        std::string w;
        AppendClass(Tables().word, false, &w);
        out += e == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                        : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
        ++i;
        continue;
      } else if (e == 'w' || e == 'W') {
        AppendClass(Tables().word, e == 'W', &out);
        ++i;
        continue;
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (c == '[') {
      ++depth;
      out += c;
      class_start = true;
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out += '^';
        ++i;
      }
      continue;
    }
    if (c == ']' && depth > 0 && !class_start) --depth;
    class_start = false;
    out += c;
  }
  return out;
}

}  // namespace

struct Regex::Impl {
  regex_t* regex = nullptr;
  ~Impl() {
    if (regex) onig_free(regex);
  }
};

Regex::Regex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Regex::~Regex() = default;

Status ParseSplitBehavior(std::string_view name, SplitBehavior* out) {
  if (name == "Removed")
    *out = SplitBehavior::kRemoved;
  else if (name == "Isolated")
    *out = SplitBehavior::kIsolated;
  else if (name == "MergedWithPrevious")
    *out = SplitBehavior::kMergedWithPrevious;
  else if (name == "MergedWithNext")
    *out = SplitBehavior::kMergedWithNext;
  else if (name == "Contiguous")
    *out = SplitBehavior::kContiguous;
  else
    return Status::InvalidArgument("split behavior '" + std::string(name) + "' is not supported");
  return Status::Ok();
}

Status Regex::Compile(std::string_view pattern, std::unique_ptr<Regex>* out) {
  InitializeOnce();
  auto impl = std::make_unique<Impl>();
  OnigErrorInfo info{};
  const std::string spelled = SpellOutClasses(pattern);
  const auto* p = reinterpret_cast<const OnigUChar*>(spelled.data());
  int rc;
  {
    std::lock_guard<std::mutex> lock(CompileMutex());
    rc = onig_new(&impl->regex, p, p + spelled.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                  ONIG_SYNTAX_DEFAULT, &info);
  }
  if (rc != ONIG_NORMAL) {
    impl->regex = nullptr;
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return Status::InvalidArgument("regex '" + std::string(pattern) +
                                   "' does not compile: " + reinterpret_cast<const char*>(message));
  }
  out->reset(new Regex(std::move(impl)));
  return Status::Ok();
}

Status Regex::CompileLiteral(std::string_view literal, std::unique_ptr<Regex>* out) {
  // Rust regex::escape's set of meta characters; Oniguruma reads a backslash
  // before any of them as that character.
  constexpr std::string_view kMeta = "\\.+*?()|[]{}^$#&-~";
  std::string escaped;
  for (char c : literal) {
    if (kMeta.find(c) != std::string_view::npos) escaped.push_back('\\');
    escaped.push_back(c);
  }
  return Compile(escaped, out);
}

std::vector<Span> Regex::FindMatches(std::string_view text) const {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Span> spans;
  std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(
      onig_region_new(), [](OnigRegion* r) { onig_region_free(r, 1); });
  const auto* s = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = s + text.size();
  std::size_t prev = 0, last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= text.size()) {
    onig_region_clear(region.get());
    const int rc =
        onig_search(impl_->regex, s, end, s + last_end, end, region.get(), ONIG_OPTION_NONE);
    // ONIG_MISMATCH ends the search; so does an error (the retry limit of a
    // pathological pattern), where the `onig` crate would panic.
    if (rc < 0) break;
    const auto b = static_cast<std::size_t>(region->beg[0]);
    const auto e = static_cast<std::size_t>(region->end[0]);
    last_end = e;
    if (b == e) {
      // The `onig` crate's find_iter: step past one character after an
      // empty match, and skip an empty match that follows a non-empty one.
      if (last_end < text.size()) {
        std::size_t next = last_end;
        NextCodepoint(text, &next);
        last_end = next;
      } else {
        ++last_end;
      }
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

std::vector<Span> FindMatchesIf(std::string_view text, bool (*predicate)(char32_t)) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Span> spans;
  std::size_t last = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    if (!predicate(NextCodepoint(text, &i))) continue;
    if (last < at) spans.push_back({last, at, false});
    spans.push_back({at, i, true});
    last = i;
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
  return spans;
}

std::vector<Span> FindMatchesOf(std::string_view text, char32_t c) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Span> spans;
  std::size_t last = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    if (NextCodepoint(text, &i) != c) continue;
    if (last < at) spans.push_back({last, at, false});
    spans.push_back({at, i, true});
    last = i;
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
  return spans;
}

void Invert(std::vector<Span>* spans) {
  for (Span& s : *spans) s.is_match = !s.is_match;
}

std::vector<std::pair<std::size_t, std::size_t>> SplitSpans(const std::vector<Span>& spans,
                                                            SplitBehavior behavior) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kContiguous:
      // Runs of equal is_match merge (the first span starts a run whatever
      // its flag, as the fold in `tokenizers` does).
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      // The mirror image, folded from the end as `tokenizers` does.
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty())
          out.back().first = it->begin;
        else
          out.emplace_back(it->begin, it->end);
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

}  // namespace sightline::hf
