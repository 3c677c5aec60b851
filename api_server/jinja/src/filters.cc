// Jinja2's built-in filters, with transformers' `tojson` (json.dumps with
// ensure_ascii=False, not Jinja2's HTML-safe one). Filters Jinja2 has and
// this file lacks are refused by name when the template is parsed.
#include <algorithm>
#include <cmath>
#include <set>

#include "builtins.h"
#include "pystr.h"

namespace sightline::jinja {

namespace {

const std::set<std::string, std::less<>> kFilters = {
    "abs",      "attr",   "batch",  "capitalize", "count",      "d",           "default",
    "dictsort", "e",      "escape", "first",      "float",      "forceescape", "indent",
    "int",      "items",  "join",   "last",       "length",     "list",        "lower",
    "map",      "max",    "min",    "reject",     "rejectattr", "replace",     "reverse",
    "round",    "safe",   "select", "selectattr", "sort",       "string",      "sum",
    "title",    "tojson", "trim",   "unique",     "upper",      "wordcount"};
// Jinja2 3.1's other filters: known, not implemented.
const std::set<std::string, std::less<>> kMissing = {
    "center",    "filesizeformat", "format",    "groupby", "pprint",   "random", "slice",
    "striptags", "truncate",       "urlencode", "urlize",  "wordwrap", "xmlattr"};

// environment.getitem along a dotted path ("function.name", "0").
Value Attribute(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? dot : dot - at);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = GetItem(v, digits ? Value::Int(std::stoll(part)) : Value::String(part));
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

Value Lowered(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::String(Lower(v.str())) : v;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// str.splitlines() boundaries.
std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::vector<char32_t> cps = DecodeUtf8(s), cur;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
        c == 0x85 || c == 0x2028 || c == 0x2029) {
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
      lines.push_back(EncodeUtf8(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) lines.push_back(EncodeUtf8(cur));
  return lines;
}

Value Indent(const Value& v, Args& a) {
  if (!v.is_string()) Fail(std::string("indent: expected a string, not ") + v.TypeName());
  const Value width = Arg(a, 0, "width", Value::Int(4));
  const std::string pad =
      width.is_string() ? width.str() : std::string(static_cast<std::size_t>(width.integer()), ' ');
  const bool first = Arg(a, 1, "first", Value::Bool(false)).Truthy();
  const bool blank = Arg(a, 2, "blank", Value::Bool(false)).Truthy();
  std::vector<std::string> lines = SplitLines(v.str() + "\n");
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (std::size_t i = 1; i < lines.size(); ++i)
        rv += (i > 1 ? "\n" : "") + (lines[i].empty() ? "" : pad + lines[i]);
    }
  }
  return Value::String(first ? pad + rv : rv);
}

Value ToJsonFilter(const Value& v, Args& a) {
  JsonOptions o;
  const Value indent = Arg(a, 1, "indent", Value::None());
  if (!indent.is_none()) {
    if (indent.kind() != Value::Kind::kInt) Unsupported("tojson indent that is not an integer");
    o.indent = static_cast<int>(std::max<std::int64_t>(0, indent.integer()));
  }
  const Value ensure_ascii = Arg(a, 0, "ensure_ascii", Value::Bool(false));
  if (ensure_ascii.Truthy()) Unsupported("tojson(ensure_ascii=True)");
  const Value seps = Arg(a, 2, "separators", Value::None());
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.list().items.size() != 2 || !seps.list().items[0].is_string() ||
        !seps.list().items[1].is_string())
      Fail("tojson separators must be a pair of strings");
    o.item_separator = seps.list().items[0].str();
    o.key_separator = seps.list().items[1].str();
    if (o.item_separator.empty() || o.key_separator.empty()) Unsupported("empty tojson separators");
  }
  o.sort_keys = Arg(a, 3, "sort_keys", Value::Bool(false)).Truthy();
  return Value::String(ToJson(v, o));
}

// select/reject/selectattr/rejectattr.
Value Select(const Value& seq, Args& a, bool attr, bool keep) {
  std::string attribute;
  std::size_t next = 0;
  if (attr) attribute = Str(Arg(a, next++, ""));
  const Value test = Arg(a, next++, "");
  Args rest;
  for (std::size_t i = next; i < a.positional.size(); ++i)
    rest.positional.push_back(a.positional[i]);
  std::vector<Value> out;
  for (const Value& item : Iterate(seq)) {
    const Value x = attr ? Attribute(item, attribute) : item;
    const bool pass = test.is_undefined() ? x.Truthy() : ApplyTest(Str(test), x, rest);
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out), false, /*iterator=*/true);
}

Value Map(const Value& seq, Args& a) {
  const Value attribute = Arg(a, SIZE_MAX, "attribute");
  std::vector<Value> out;
  if (!attribute.is_undefined()) {
    const Value dflt = Arg(a, SIZE_MAX, "default", Value::None());
    for (const Value& item : Iterate(seq)) {
      Value v = Attribute(item, Str(attribute));
      if (v.is_undefined() && !dflt.is_none()) v = dflt;
      out.push_back(v);
    }
  } else {
    if (a.positional.empty()) Fail("map requires a filter argument");
    const std::string name = Str(a.positional[0]);
    if (Status s = CheckFilter(name); !s.ok()) Unsupported("filter '" + name + "' in map()");
    Args rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const Value& item : Iterate(seq)) out.push_back(ApplyFilter(name, item, rest));
  }
  return Value::List(std::move(out), false, /*iterator=*/true);
}

Value Sorted(const Value& v, Args& a) {
  const bool reverse = Arg(a, 0, "reverse", Value::Bool(false)).Truthy();
  const bool cs = Arg(a, 1, "case_sensitive", Value::Bool(false)).Truthy();
  const Value attribute = Arg(a, 2, "attribute");
  std::vector<Value> items = Iterate(v);
  auto key = [&](const Value& x) {
    return Lowered(attribute.is_undefined() ? x : Attribute(x, Str(attribute)), cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? Less(key(y), key(x)) : Less(key(x), key(y));
  });
  return Value::List(std::move(items));
}

Value MinMax(const Value& v, Args& a, bool max) {
  const bool cs = Arg(a, 0, "case_sensitive", Value::Bool(false)).Truthy();
  const Value attribute = Arg(a, 1, "attribute");
  const std::vector<Value> items = Iterate(v);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    return Lowered(attribute.is_undefined() ? x : Attribute(x, Str(attribute)), cs);
  };
  const Value* best = &items[0];
  for (const Value& x : items)
    if (max ? Less(key(*best), key(x)) : Less(key(x), key(*best))) best = &x;
  return *best;
}

Value ToInt(const Value& v, Args& a) {
  const Value dflt = Arg(a, 0, "default", Value::Int(0));
  if (v.is_number()) return Value::Int(static_cast<std::int64_t>(v.number()));
  if (v.is_string()) {
    const std::string s = v.str();
    try {
      std::size_t used = 0;
      const long long i = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::Int(i);
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value::Int(static_cast<std::int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value ToFloat(const Value& v, Args& a) {
  const Value dflt = Arg(a, 0, "default", Value::Float(0));
  if (v.is_number()) return Value::Float(v.number());
  if (v.is_string()) {
    try {
      std::size_t used = 0;
      const double d = std::stod(v.str(), &used);
      if (used == v.str().size()) return Value::Float(d);
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value Round(const Value& v, Args& a) {
  const std::int64_t precision = Arg(a, 0, "precision", Value::Int(0)).integer();
  const std::string method = Str(Arg(a, 1, "method", Value::String("common")));
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.number() * scale;
  double r;
  if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else if (method == "common")
    r = std::nearbyint(x);  // Python's round(): half to even
  else
    Fail("method must be 'common', 'ceil' or 'floor'");
  return Value::Float(r / scale);
}

std::int64_t WordCount(const std::string& s) {
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(s)) {
    const std::string one = EncodeUtf8({c});
    const bool word = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0
                                            : (Upper(one) != Lower(one) || !IsSpace(c)));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return n;
}

}  // namespace

Status CheckFilter(std::string_view name) {
  if (kFilters.contains(name)) return Status::Ok();
  if (kMissing.contains(name))
    return Status::InvalidArgument("unsupported filter '" + std::string(name) + "'");
  return Status::InvalidArgument("unsupported filter '" + std::string(name) +
                                 "' (Jinja2 has no such filter)");
}

Value ApplyFilter(const std::string& name, const Value& v, Args& a) {
  if (name == "safe") return v;
  if (name == "string") return Value::String(Str(v));
  if (name == "tojson") return ToJsonFilter(v, a);
  if (name == "length" || name == "count") return Value::Int(Length(v));
  if (name == "trim") {
    Args strip_args;
    strip_args.positional.push_back(Arg(a, 0, "chars", Value::None()));
    return Method(Value::String(Str(v)), "strip").Call(strip_args);
  }
  if (name == "upper") return Value::String(Upper(Str(v)));
  if (name == "lower") return Value::String(Lower(Str(v)));
  if (name == "capitalize" || name == "title") {
    if (name == "capitalize") return Method(Value::String(Str(v)), "capitalize").Call(a);
    // Jinja2's title: words start after '-', whitespace, or an opening bracket.
    std::string out;
    bool start = true;
    for (char32_t c : DecodeUtf8(Str(v))) {
      const std::string one = EncodeUtf8({c});
      const bool sep = IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      out += sep ? one : start ? Upper(one) : Lower(one);
      start = sep;
    }
    return Value::String(out);
  }
  if (name == "replace") {
    Args r;
    r.positional = {Arg(a, 0, "old"), Arg(a, 1, "new")};
    if (Value c = Arg(a, 2, "count", Value::None()); !c.is_none()) r.positional.push_back(c);
    return Method(Value::String(Str(v)), "replace").Call(r);
  }
  if (name == "default" || name == "d") {
    const bool boolean = Arg(a, 1, "boolean", Value::Bool(false)).Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy()))
      return Arg(a, 0, "default_value", Value::String(""));
    return v;
  }
  if (name == "join") {
    const std::string sep = Str(Arg(a, 0, "d", Value::String("")));
    const Value attribute = Arg(a, 1, "attribute", Value::None());
    std::string out;
    bool first = true;
    for (const Value& e : Iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += Str(attribute.is_none() ? e : Attribute(e, Str(attribute)));
    }
    return Value::String(out);
  }
  if (name == "first" || name == "last") {
    std::vector<Value> items = Iterate(v);
    if (items.empty())
      return Value::Undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::List(Iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value::List({}, false, true);
    if (!v.is_dict() || v.dict().is_namespace) Fail("Can only get item pairs from a mapping.");
    Value l = Method(v, "items").Call(a);
    l.list().iterator = true;
    return l;
  }
  if (name == "reverse") {
    if (v.is_string()) return SliceOf(v, Value(), Value(), Value::Int(-1));
    std::vector<Value> items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items), false, /*iterator=*/v.is_list());
  }
  if (name == "unique") {
    const bool cs = Arg(a, 0, "case_sensitive", Value::Bool(false)).Truthy();
    const Value attribute = Arg(a, 1, "attribute", Value::None());
    std::vector<Value> out, seen;
    for (const Value& e : Iterate(v)) {
      const Value key = Lowered(attribute.is_none() ? e : Attribute(e, Str(attribute)), cs);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, key); }))
        continue;
      seen.push_back(key);
      out.push_back(e);
    }
    return Value::List(std::move(out), false, /*iterator=*/true);
  }
  if (name == "sort") return Sorted(v, a);
  if (name == "dictsort") {
    if (!v.is_dict()) Fail("You can only sort by either 'key' or 'value'");
    const bool cs = Arg(a, 0, "case_sensitive", Value::Bool(false)).Truthy();
    const std::string by = Str(Arg(a, 1, "by", Value::String("key")));
    const bool reverse = Arg(a, 2, "reverse", Value::Bool(false)).Truthy();
    std::vector<Value> items = Method(v, "items").Call(a).list().items;
    const std::size_t k = by == "value" ? 1 : 0;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = Lowered(x.list().items[k], cs), ky = Lowered(y.list().items[k], cs);
      return reverse ? Less(ky, kx) : Less(kx, ky);
    });
    return Value::List(std::move(items));
  }
  if (name == "select" || name == "reject") return Select(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return Select(v, a, true, name == "selectattr");
  if (name == "map") return Map(v, a);
  if (name == "attr") return GetAttr(v, Str(Arg(a, 0, "name")));
  if (name == "int") return ToInt(v, a);
  if (name == "float") return ToFloat(v, a);
  if (name == "abs") {
    if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.number()));
    if (!v.is_number()) Fail(std::string("bad operand type for abs(): '") + v.TypeName() + "'");
    return Value::Int(std::llabs(v.integer()));
  }
  if (name == "round") return Round(v, a);
  if (name == "sum") {
    const Value attribute = Arg(a, 0, "attribute", Value::None());
    Value total = Arg(a, 1, "start", Value::Int(0));
    for (const Value& e : Iterate(v))
      total = Binary("+", total, attribute.is_none() ? e : Attribute(e, Str(attribute)));
    return total;
  }
  if (name == "min" || name == "max") return MinMax(v, a, name == "max");
  if (name == "escape" || name == "e" || name == "forceescape")
    return Value::String(Escape(Str(v)));
  if (name == "indent") return Indent(v, a);
  if (name == "wordcount") return Value::Int(WordCount(Str(v)));
  if (name == "batch") {
    const std::int64_t n = Arg(a, 0, "linecount").integer();
    if (n <= 0) Fail("batch size must be positive");
    const Value fill = Arg(a, 1, "fill_with", Value::None());
    std::vector<Value> out, cur;
    for (const Value& e : Iterate(v)) {
      cur.push_back(e);
      if (static_cast<std::int64_t>(cur.size()) == n) {
        out.push_back(Value::List(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (!fill.is_none())
        while (static_cast<std::int64_t>(cur.size()) < n) cur.push_back(fill);
      out.push_back(Value::List(std::move(cur)));
    }
    return Value::List(std::move(out), false, true);
  }
  Unsupported("filter '" + name + "'");
}

}  // namespace sightline::jinja
