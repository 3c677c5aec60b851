#include "pystr.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "sightline/json_string.h"

namespace sightline::jinja {

namespace {

void Hex(char32_t c, int digits, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, static_cast<unsigned>(c));
  *out += buf;
}

// str.isprintable(): not a control, format, separator (but ' '), surrogate,
// private-use or unassigned code point.
bool Printable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return false;
    default:
      return true;
  }
}

std::string ReprString(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!Printable(c)) {
      if (c < 0x100) {
        out += "\\x";
        Hex(c, 2, &out);
      } else if (c < 0x10000) {
        out += "\\u";
        Hex(c, 4, &out);
      } else {
        out += "\\U";
        Hex(c, 8, &out);
      }
    } else {
      AppendUtf8(c, &out);
    }
  }
  return out + quote;
}

void Json(const Value& v, const JsonOptions& o, int level, std::string* out) {
  const std::string item_sep =
      !o.item_separator.empty() ? o.item_separator : (o.indent >= 0 ? "," : ", ");
  const std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
  auto newline = [&](int l) {
    if (o.indent < 0) return;
    *out += '\n';
    out->append(static_cast<std::size_t>(o.indent * l), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.boolean() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.integer());
      return;
    case Value::Kind::kFloat:
      if (std::isnan(v.number()))
        *out += "NaN";
      else if (std::isinf(v.number()))
        *out += v.number() > 0 ? "Infinity" : "-Infinity";
      else
        *out += FloatRepr(v.number());
      return;
    case Value::Kind::kString:
      AppendJsonString(v.str(), out);  // json.dumps(ensure_ascii=False)
      return;
    case Value::Kind::kList: {
      if (v.list().iterator) break;
      const auto& items = v.list().items;
      if (items.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        Json(items[i], o, level + 1, out);
      }
      newline(level);
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().is_namespace) break;
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (items.empty()) {
        *out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      *out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        AppendJsonString(items[i]->first, out);
        *out += key_sep;
        Json(items[i]->second, o, level + 1, out);
      }
      newline(level);
      *out += '}';
      return;
    }
    default:
      break;
  }
  Fail(std::string("Object of type ") + v.TypeName() + " is not JSON serializable");
}

}  // namespace

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // [-]d[.ddd]e[+-]XX
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1);
    if (digits.size() > 1) m += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + m + eb;
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<std::size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<std::size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<std::size_t>(exp) + 1) + "." +
          digits.substr(static_cast<std::size_t>(exp) + 1);
  }
  return sign + out;
}

std::string Str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kString:
      return v.str();
    default:
      return Repr(v);
  }
}

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.boolean() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.integer());
    case Value::Kind::kFloat:
      return FloatRepr(v.number());
    case Value::Kind::kString:
      return ReprString(v.str());
    case Value::Kind::kList: {
      const auto& l = v.list();
      if (l.iterator) return "<generator object>";
      std::string out = l.tuple ? "(" : "[";
      for (std::size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += Repr(l.items[i]);
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      return out + (l.tuple ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += ReprString(k) + ": " + Repr(e);
      }
      out += "}";
      return v.dict().is_namespace ? "<Namespace " + out + ">" : out;
    }
    case Value::Kind::kCallable:
      return "<function " + v.callable_name() + ">";
  }
  return "";
}

std::string ToJson(const Value& v, const JsonOptions& o) {
  std::string out;
  Json(v, o, 0, &out);
  return out;
}

std::string Upper(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s))
    AppendUtf8(static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))), &out);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s))
    AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), &out);
  return out;
}

bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace sightline::jinja
