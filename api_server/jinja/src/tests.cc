// Jinja2's built-in tests (`x is defined`, `n is divisibleby(3)`...).
#include <set>

#include "builtins.h"
#include "pystr.h"

namespace sightline::jinja {

namespace {

const std::set<std::string, std::less<>> kTests = {
    "boolean", "callable", "defined",  "divisibleby", "eq",       "equalto", "escaped",
    "even",    "false",    "filter",   "float",       "ge",       "gt",      "greaterthan",
    "in",      "integer",  "iterable", "le",          "lessthan", "lower",   "lt",
    "mapping", "ne",       "none",     "number",      "odd",      "sameas",  "sequence",
    "string",  "test",     "true",     "undefined",   "upper",    "==",      "!=",
    ">",       ">=",       "<",        "<="};

std::int64_t Mod(const Value& v, const Value& n) {
  const Value r = Binary("%", v, n);
  return r.kind() == Value::Kind::kFloat ? (r.number() == 0 ? 0 : 1) : r.integer();
}

}  // namespace

Status CheckTest(std::string_view name) {
  if (kTests.contains(name)) return Status::Ok();
  return Status::InvalidArgument("unsupported test '" + std::string(name) + "'");
}

bool ApplyTest(const std::string& name, const Value& v, Args& a) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.boolean();
  if (name == "false") return v.kind() == K::kBool && !v.boolean();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_list() ||
           (v.is_dict() && !v.dict().is_namespace);
  if (name == "sequence")
    return v.is_string() || (v.is_list() && !v.list().iterator) ||
           (v.is_dict() && !v.dict().is_namespace);
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower") return Str(v) == Lower(Str(v)) && Str(v) != Upper(Str(v));
  if (name == "upper") return Str(v) == Upper(Str(v)) && Str(v) != Lower(Str(v));
  if (name == "even") return Mod(v, Value::Int(2)) == 0;
  if (name == "odd") return Mod(v, Value::Int(2)) != 0;
  if (name == "divisibleby") return Mod(v, Arg(a, 0, "num")) == 0;
  if (name == "filter") return v.is_string() && CheckFilter(v.str()).ok();
  if (name == "test") return v.is_string() && CheckTest(v.str()).ok();
  const Value other = Arg(a, 0, "other");
  if (name == "in") return Compare("in", v, Arg(a, 0, "seq"));
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, other);
  if (name == "ne" || name == "!=") return !Equal(v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(">", v, other);
  if (name == "ge" || name == ">=") return Compare(">=", v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return Compare("<", v, other);
  if (name == "le" || name == "<=") return Compare("<=", v, other);
  if (name == "sameas") {
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.kind() == K::kBool) return Equal(v, other);
    if (v.is_list()) return &v.list() == &other.list();
    if (v.is_dict()) return &v.dict() == &other.dict();
    return Equal(v, other);  // small ints and interned strings, as CPython mostly has it
  }
  Unsupported("test '" + name + "'");
}

}  // namespace sightline::jinja
