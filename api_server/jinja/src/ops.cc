#include <cmath>

#include "builtins.h"
#include "pystr.h"

namespace sightline::jinja {

namespace {

std::string TypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(v.TypeName()) + " object";
}

// Python's index normalization for one subscript.
bool Index(std::int64_t i, std::size_t size, std::size_t* out) {
  const auto n = static_cast<std::int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return false;
  *out = static_cast<std::size_t>(i);
  return true;
}

std::int64_t AsIndex(const Value& v, const char* what) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return v.integer();
  Fail(std::string(what) + " indices must be integers or None, not " + v.TypeName());
}

double Num(const Value& v, const std::string& op, const Value& other, bool left) {
  if (v.is_undefined()) RaiseUndefined(v);
  if (!v.is_number()) {
    const Value& a = left ? v : other;
    const Value& b = left ? other : v;
    Fail("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() +
         "'");
  }
  return v.number();
}

}  // namespace

void RaiseUndefined(const Value& undefined) {
  Fail(undefined.str().empty() ? "undefined value" : undefined.str());
}

Value UndefinedMember(const Value& obj, const Value& key) {
  if (key.is_string())
    return Value::Undefined("'" + TypeRepr(obj) + "' has no attribute '" + key.str() + "'");
  return Value::Undefined("'" + TypeRepr(obj) + "' has no element " + Repr(key));
}

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) RaiseUndefined(obj);
  if (!name.empty() && name[0] == '_')
    return Value::Undefined("access to attribute '" + name + "' of '" + obj.TypeName() +
                            "' object is unsafe.");
  if (obj.is_dict() && obj.dict().is_namespace) {
    if (const Value* v = obj.dict().Find(name)) return *v;
    return UndefinedMember(obj, Value::String(name));
  }
  Value m = Method(obj, name);
  if (!m.is_undefined() || !m.str().empty()) return m;
  if (obj.is_dict())
    if (const Value* v = obj.dict().Find(name)) return *v;
  return UndefinedMember(obj, Value::String(name));
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) RaiseUndefined(obj);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
  } else if (obj.is_list() && !obj.list().iterator &&
             (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    std::size_t i;
    if (Index(key.integer(), obj.list().items.size(), &i)) return obj.list().items[i];
  } else if (obj.is_string() &&
             (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    const auto cps = DecodeUtf8(obj.str());
    std::size_t i;
    if (Index(key.integer(), cps.size(), &i)) return Value::String(EncodeUtf8({cps[i]}));
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return UndefinedMember(obj, key);
}

Value SliceOf(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) RaiseUndefined(obj);
  const std::int64_t step =
      step_v.is_undefined() || step_v.is_none() ? 1 : AsIndex(step_v, "slice");
  if (step == 0) Fail("slice step cannot be zero");
  std::vector<Value> items;
  std::vector<char32_t> cps;
  std::int64_t n;
  if (obj.is_string()) {
    cps = DecodeUtf8(obj.str());
    n = static_cast<std::int64_t>(cps.size());
  } else if (obj.is_list() && !obj.list().iterator) {
    n = static_cast<std::int64_t>(obj.list().items.size());
  } else {
    Fail(std::string("'") + obj.TypeName() + "' object is not subscriptable");
  }
  // PySlice_AdjustIndices.
  auto bound = [&](const Value& v, std::int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    std::int64_t i = AsIndex(v, "slice");
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const std::int64_t start = bound(start_v, step < 0 ? n - 1 : 0);
  const std::int64_t stop = bound(stop_v, step < 0 ? -1 : n);
  std::vector<std::size_t> picked;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    picked.push_back(static_cast<std::size_t>(i));
  if (obj.is_string()) {
    std::vector<char32_t> out;
    for (auto i : picked) out.push_back(cps[i]);
    return Value::String(EncodeUtf8(out));
  }
  for (auto i : picked) items.push_back(obj.list().items[i]);
  return Value::List(std::move(items), obj.list().tuple);
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.list().items;
    case Value::Kind::kDict: {
      if (v.dict().is_namespace) break;
      std::vector<Value> keys;
      for (const auto& [k, e] : v.dict().items) keys.push_back(Value::String(k));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : DecodeUtf8(v.str())) chars.push_back(Value::String(EncodeUtf8({c})));
      return chars;
    }
    default:
      break;
  }
  Fail(std::string("'") + v.TypeName() + "' object is not iterable");
}

std::int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<std::int64_t>(CodePointCount(v.str()));
    case Value::Kind::kList:
      if (v.list().iterator) break;
      return static_cast<std::int64_t>(v.list().items.size());
    case Value::Kind::kDict:
      if (v.dict().is_namespace) break;
      return static_cast<std::int64_t>(v.dict().items.size());
    default:
      break;
  }
  Fail(std::string("object of type '") + v.TypeName() + "' has no len()");
}

Value Binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::String(Str(a) + Str(b));
  if (a.is_undefined()) RaiseUndefined(a);
  if (b.is_undefined()) RaiseUndefined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::String(a.str() + b.str());
    if (a.is_list() && b.is_list() && !a.list().iterator && !b.list().iterator &&
        a.list().tuple == b.list().tuple) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.list().tuple);
    }
    if (!a.is_number() || !b.is_number()) {
      if (a.is_string() || a.is_list())
        Fail(std::string("can only concatenate ") + a.TypeName() + " (not \"" + b.TypeName() +
             "\") to " + a.TypeName());
      Fail(std::string("unsupported operand type(s) for +: '") + a.TypeName() + "' and '" +
           b.TypeName() + "'");
    }
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list()   ? &a
                       : b.is_string() || b.is_list() ? &b
                                                      : nullptr;
    const Value& count = seq == &a ? b : a;
    if (seq && (count.kind() == Value::Kind::kInt || count.kind() == Value::Kind::kBool)) {
      const std::int64_t k = std::max<std::int64_t>(0, count.integer());
      if (k > 1'000'000) Fail("repetition count too large");
      if (seq->is_string()) {
        std::string out;
        for (std::int64_t i = 0; i < k; ++i) out += seq->str();
        return Value::String(out);
      }
      std::vector<Value> items;
      for (std::int64_t i = 0; i < k; ++i)
        items.insert(items.end(), seq->list().items.begin(), seq->list().items.end());
      return Value::List(std::move(items), seq->list().tuple);
    }
  }
  if (op == "%" && a.is_string()) Unsupported("printf-style string formatting ('...' % x)");
  const double x = Num(a, op, b, true), y = Num(b, op, a, false);
  const bool ints = a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
  if (op == "/") {
    if (y == 0) Fail("division by zero");
    return Value::Float(x / y);
  }
  if (ints) {
    const std::int64_t i = a.integer(), j = b.integer();
    if (op == "+") return Value::Int(i + j);
    if (op == "-") return Value::Int(i - j);
    if (op == "*") return Value::Int(i * j);
    if (op == "//" || op == "%") {
      if (j == 0) Fail("integer division or modulo by zero");
      std::int64_t q = i / j, r = i % j;
      if (r != 0 && ((r < 0) != (j < 0))) {
        --q;
        r += j;
      }
      return Value::Int(op == "//" ? q : r);
    }
    if (op == "**") {
      if (j < 0) return Value::Float(std::pow(x, y));
      std::int64_t r = 1;
      for (std::int64_t k = 0; k < j; ++k) r *= i;
      return Value::Int(r);
    }
  }
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "//" || op == "%") {
    if (y == 0) Fail("float floor division by zero");
    const double q = std::floor(x / y);
    return Value::Float(op == "//" ? q : x - q * y);
  }
  if (op == "**") return Value::Float(std::pow(x, y));
  Fail("unknown operator " + op);
}

bool Less(const Value& a, const Value& b) {
  if (a.is_undefined()) RaiseUndefined(a);
  if (b.is_undefined()) RaiseUndefined(b);
  if (a.is_number() && b.is_number()) return a.number() < b.number();
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 orders as code points
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Fail(std::string("'<' not supported between instances of '") + a.TypeName() + "' and '" +
       b.TypeName() + "'");
}

bool Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  if (op == "<=") return Less(a, b) || Equal(a, b);
  if (op == ">=") return Less(b, a) || Equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string())
        Fail(std::string("'in <string>' requires string as left operand, not ") + a.TypeName());
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_dict() && !b.dict().is_namespace) {
      found = a.is_string() && b.dict().Find(a.str()) != nullptr;
    } else {
      for (const Value& e : Iterate(b))
        if (Equal(e, a)) {
          found = true;
          break;
        }
    }
    return op == "in" ? found : !found;
  }
  Fail("unknown comparison " + op);
}

Value Arg(Args& args, std::size_t i, const char* name, Value fallback) {
  if (i < args.positional.size()) return args.positional[i];
  for (auto& [k, v] : args.keyword)
    if (k == name) return v;
  return fallback;
}

}  // namespace sightline::jinja
