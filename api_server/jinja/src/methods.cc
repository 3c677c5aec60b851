// Python's str, dict and list methods as bound callables. A method Python
// has and this file lacks is refused when called, naming it; one the
// immutable sandbox forbids (list.append, dict.update...) raises as Jinja2's
// SecurityError does.
#include <algorithm>
#include <set>

#include "builtins.h"
#include "pystr.h"

namespace sightline::jinja {

namespace {

const std::set<std::string, std::less<>> kStrMethods = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const std::set<std::string, std::less<>> kDictMethods = {
    "clear", "copy",    "fromkeys",   "get",    "items", "keys",
    "pop",   "popitem", "setdefault", "update", "values"};
const std::set<std::string, std::less<>> kDictUnsafe = {"clear", "pop", "popitem", "setdefault",
                                                        "update"};
const std::set<std::string, std::less<>> kListMethods = {"append", "clear",   "copy",   "count",
                                                         "extend", "index",   "insert", "pop",
                                                         "remove", "reverse", "sort"};
const std::set<std::string, std::less<>> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                        "pop",    "remove", "reverse", "sort"};

std::string StrArg(const Value& v, const char* method) {
  if (!v.is_string()) Fail(std::string(method) + "() argument must be str, not " + v.TypeName());
  return v.str();
}

// str.strip family: `chars` None strips whitespace.
std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<char32_t> cps = DecodeUtf8(s);
  std::vector<char32_t> set;
  const bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = DecodeUtf8(StrArg(chars, "strip"));
  auto strip = [&](char32_t c) {
    return ws ? IsSpace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b])) ++b;
  if (right)
    while (e > b && strip(cps[e - 1])) --e;
  return EncodeUtf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(b),
                                          cps.begin() + static_cast<std::ptrdiff_t>(e)));
}

Value Split(const std::string& s, const Value& sep_v, const Value& max_v, bool from_right) {
  std::int64_t max = max_v.is_undefined() || max_v.is_none() ? -1 : max_v.integer();
  std::vector<std::string> parts;
  if (sep_v.is_undefined() || sep_v.is_none()) {
    // Runs of whitespace; no empty strings.
    std::vector<char32_t> cps = DecodeUtf8(s);
    if (from_right) std::reverse(cps.begin(), cps.end());
    std::size_t i = 0;
    while (true) {
      while (i < cps.size() && IsSpace(cps[i])) ++i;
      if (i == cps.size()) break;
      if (max >= 0 && static_cast<std::int64_t>(parts.size()) == max) {
        std::size_t e = cps.size();
        while (e > i && IsSpace(cps[e - 1])) --e;
        std::vector<char32_t> rest(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                   cps.begin() + static_cast<std::ptrdiff_t>(e));
        if (from_right) std::reverse(rest.begin(), rest.end());
        parts.push_back(EncodeUtf8(rest));
        break;
      }
      std::size_t j = i;
      while (j < cps.size() && !IsSpace(cps[j])) ++j;
      std::vector<char32_t> word(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                 cps.begin() + static_cast<std::ptrdiff_t>(j));
      if (from_right) std::reverse(word.begin(), word.end());
      parts.push_back(EncodeUtf8(word));
      i = j;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
  } else {
    const std::string sep = StrArg(sep_v, "split");
    if (sep.empty()) Fail("empty separator");
    if (!from_right) {
      std::size_t at = 0;
      while (max < 0 || static_cast<std::int64_t>(parts.size()) < max) {
        const std::size_t f = s.find(sep, at);
        if (f == std::string::npos) break;
        parts.push_back(s.substr(at, f - at));
        at = f + sep.size();
      }
      parts.push_back(s.substr(at));
    } else {
      std::size_t end = s.size();
      while (max < 0 || static_cast<std::int64_t>(parts.size()) < max) {
        if (end < sep.size()) break;
        const std::size_t f = s.rfind(sep, end - sep.size());
        if (f == std::string::npos) break;
        parts.push_back(s.substr(f + sep.size(), end - f - sep.size()));
        end = f;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::List(std::move(out));
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string x = StrArg(a, prefix ? "startswith" : "endswith");
    return prefix ? s.starts_with(x) : s.ends_with(x);
  };
  if (affix.is_list() && affix.list().tuple) {
    for (const Value& a : affix.list().items)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// Byte offset -> code point index, for find().
std::int64_t CpIndex(const std::string& s, std::size_t byte) {
  return static_cast<std::int64_t>(CodePointCount(std::string_view(s).substr(0, byte)));
}

std::string Capitalize(const std::string& s) {
  std::vector<char32_t> cps = DecodeUtf8(s);
  if (cps.empty()) return s;
  std::string first = Upper(EncodeUtf8({cps[0]}));
  cps.erase(cps.begin());
  return first + Lower(EncodeUtf8(cps));
}

// str.title(): a cased letter after an uncased character starts a word.
std::string Title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    const std::string one = EncodeUtf8({c});
    const std::string up = Upper(one), low = Lower(one);
    const bool cased = up != low;
    out += cased ? (prev_cased ? low : up) : one;
    prev_cased = cased;
  }
  return out;
}

std::string Format(const std::string& fmt, Args& args) {
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const std::size_t e = fmt.find('}', i);
      if (e == std::string::npos) Fail("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        Unsupported("str.format() field '" + field + "' (only {}, {0} and {name} are supported)");
      Value v;
      if (field.empty()) {
        v = Arg(args, next++, "");
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        v = Arg(args, static_cast<std::size_t>(std::stoul(field)), "");
      } else {
        v = Arg(args, SIZE_MAX, field.c_str());
      }
      if (v.is_undefined() && v.str().empty()) Fail("format(): missing argument '" + field + "'");
      out += Str(v);
      i = e;
    } else {
      out += c;
    }
  }
  return out;
}

Value StrMethod(const std::string& s, const std::string& name, Args& a) {
  if (name == "strip") return Value::String(Strip(s, Arg(a, 0, "chars"), true, true));
  if (name == "lstrip") return Value::String(Strip(s, Arg(a, 0, "chars"), true, false));
  if (name == "rstrip") return Value::String(Strip(s, Arg(a, 0, "chars"), false, true));
  if (name == "split") return Split(s, Arg(a, 0, "sep"), Arg(a, 1, "maxsplit"), false);
  if (name == "rsplit") return Split(s, Arg(a, 0, "sep"), Arg(a, 1, "maxsplit"), true);
  if (name == "startswith") return Value::Bool(AffixMatch(s, Arg(a, 0, "prefix"), true));
  if (name == "endswith") return Value::Bool(AffixMatch(s, Arg(a, 0, "suffix"), false));
  if (name == "upper") return Value::String(Upper(s));
  if (name == "lower") return Value::String(Lower(s));
  if (name == "capitalize") return Value::String(Capitalize(s));
  if (name == "title") return Value::String(Title(s));
  if (name == "replace") {
    const std::string from = StrArg(Arg(a, 0, "old"), "replace");
    const std::string to = StrArg(Arg(a, 1, "new"), "replace");
    const Value count_v = Arg(a, 2, "count");
    std::int64_t count = count_v.is_undefined() ? -1 : count_v.integer();
    std::string out;
    std::size_t at = 0;
    if (from.empty()) {  // inserts between every code point
      std::vector<char32_t> cps = DecodeUtf8(s);
      for (std::size_t i = 0; i <= cps.size(); ++i) {
        if (count < 0 || static_cast<std::int64_t>(i) < count) out += to;
        if (i < cps.size()) AppendUtf8(cps[i], &out);
      }
      return Value::String(out);
    }
    while (count != 0) {
      const std::size_t f = s.find(from, at);
      if (f == std::string::npos) break;
      out += s.substr(at, f - at) + to;
      at = f + from.size();
      if (count > 0) --count;
    }
    return Value::String(out + s.substr(at));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string sub = StrArg(Arg(a, 0, "sub"), name.c_str());
    if (a.positional.size() > 1) Unsupported("str." + name + "() with start/end");
    const std::size_t f = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (f == std::string::npos) {
      if (name.ends_with("index")) Fail("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CpIndex(s, f));
  }
  if (name == "count") {
    const std::string sub = StrArg(Arg(a, 0, "sub"), "count");
    if (sub.empty()) return Value::Int(static_cast<std::int64_t>(CodePointCount(s)) + 1);
    std::int64_t n = 0;
    for (std::size_t f = s.find(sub); f != std::string::npos; f = s.find(sub, f + sub.size())) ++n;
    return Value::Int(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : Iterate(Arg(a, 0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += StrArg(v, "join");
    }
    return Value::String(out);
  }
  if (name == "format") return Value::String(Format(s, a));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string x = StrArg(Arg(a, 0, "prefix"), name.c_str());
    if (name == "removeprefix") return Value::String(s.starts_with(x) ? s.substr(x.size()) : s);
    return Value::String(s.ends_with(x) ? s.substr(0, s.size() - x.size()) : s);
  }
  if (name.starts_with("is") && name != "istitle" && name != "isidentifier" &&
      name != "isprintable") {
    const std::vector<char32_t> cps = DecodeUtf8(s);
    if (cps.empty()) return Value::Bool(false);
    bool cased = false, ok = true;
    for (char32_t c : cps) {
      const std::string one = EncodeUtf8({c});
      const bool up = Lower(one) != one, low = Upper(one) != one;
      cased |= up || low;
      if (name == "isspace")
        ok &= IsSpace(c);
      else if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
        ok &= c >= '0' && c <= '9';
      else if (name == "isascii")
        ok &= c < 0x80;
      else if (name == "isalpha")
        ok &= c < 0x80 ? std::isalpha(static_cast<int>(c)) != 0 : (up || low);
      else if (name == "isalnum")
        ok &= c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : (up || low);
      else if (name == "isupper")
        ok &= !low;
      else if (name == "islower")
        ok &= !up;
    }
    if (name == "isupper" || name == "islower") ok &= cased;
    if (name == "isascii") return Value::Bool(ok);
    return Value::Bool(ok);
  }
  Unsupported("method str." + name + "()");
}

Value DictMethod(const Value& d, const std::string& name, Args& a) {
  const auto& items = d.dict().items;
  if (name == "items") {
    std::vector<Value> out;
    for (const auto& [k, v] : items) out.push_back(Value::List({Value::String(k), v}, true));
    return Value::List(std::move(out));
  }
  if (name == "keys") {
    std::vector<Value> out;
    for (const auto& kv : items) out.push_back(Value::String(kv.first));
    return Value::List(std::move(out));
  }
  if (name == "values") {
    std::vector<Value> out;
    for (const auto& kv : items) out.push_back(kv.second);
    return Value::List(std::move(out));
  }
  if (name == "get") {
    const Value key = Arg(a, 0, "key");
    if (key.is_string())
      if (const Value* v = d.dict().Find(key.str())) return *v;
    return Arg(a, 1, "default", Value::None());
  }
  if (name == "copy") {
    Value c = Value::Dict();
    c.dict().items = items;
    return c;
  }
  Unsupported("method dict." + name + "()");
}

Value ListMethod(const Value& l, const std::string& name, Args& a) {
  const auto& items = l.list().items;
  if (name == "count") {
    const Value x = Arg(a, 0, "value");
    return Value::Int(
        std::count_if(items.begin(), items.end(), [&](const Value& v) { return Equal(v, x); }));
  }
  if (name == "index") {
    const Value x = Arg(a, 0, "value");
    for (std::size_t i = 0; i < items.size(); ++i)
      if (Equal(items[i], x)) return Value::Int(static_cast<std::int64_t>(i));
    Fail(Repr(x) + " is not in list");
  }
  if (name == "copy") return Value::List(items, l.list().tuple);
  Unsupported("method list." + name + "()");
}

}  // namespace

Value Method(const Value& obj, const std::string& name) {
  const std::set<std::string, std::less<>>* known = nullptr;
  const std::set<std::string, std::less<>>* unsafe = nullptr;
  std::string type;
  if (obj.is_string()) {
    known = &kStrMethods;
    type = "str";
  } else if (obj.is_dict() && !obj.dict().is_namespace) {
    known = &kDictMethods;
    unsafe = &kDictUnsafe;
    type = "dict";
  } else if (obj.is_list() && !obj.list().iterator) {
    known = &kListMethods;
    unsafe = &kListUnsafe;
    type = obj.list().tuple ? "tuple" : "list";
    if (obj.list().tuple && name != "count" && name != "index") return Value();
  } else {
    return Value();
  }
  if (!known->contains(name)) return Value();
  if (unsafe && unsafe->contains(name))
    return Value::Undefined("access to attribute '" + name + "' of '" + type +
                            "' object is unsafe.");
  Value self = obj;
  return Value::Callable(type + "." + name, [self, name](Args& a) -> Value {
    if (self.is_string()) return StrMethod(self.str(), name, a);
    if (self.is_dict()) return DictMethod(self, name, a);
    return ListMethod(self, name, a);
  });
}

}  // namespace sightline::jinja
