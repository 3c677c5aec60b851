// The Jinja value model: what Python objects a chat template sees. None,
// bool, int, float, str, list/tuple, dict (insertion-ordered, string keys,
// as JSON gives them), callables (globals, methods, macros), and Jinja's
// default Undefined. Lists and dicts are shared by reference, as in Python,
// so that a namespace() set inside a loop is seen after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sightline::jinja {

class Value;

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(Args&)>;

struct ListData;
struct DictData;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // Undefined
  static Value Undefined(std::string hint = "");
  static Value None();
  static Value Bool(bool b);
  static Value Int(std::int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  // `iterator`: a generator/iterator result (select, map, reverse...):
  // always true, has no length, prints as an object, as in Python.
  static Value List(std::vector<Value> items, bool tuple = false, bool iterator = false);
  static Value Dict(bool is_namespace = false);
  static Value Callable(std::string name, Function f);
  // Objects keep their keys' order, as Python's json does.
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool boolean() const { return b_; }
  std::int64_t integer() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double number() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(integer()); }
  // kString; also the Undefined's message and a callable's name.
  const std::string& str() const {
    static const std::string kEmpty;
    return s_ ? *s_ : kEmpty;
  }
  ListData& list() const { return *list_; }
  DictData& dict() const { return *dict_; }
  const std::string& callable_name() const { return str(); }
  Value Call(Args& args) const { return (*fn_)(args); }

  bool Truthy() const;
  // Python's type name for messages: 'str', 'list', 'NoneType'...
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  std::int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<const Function> fn_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  bool iterator = false;
};

struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value v);
};

// Python semantics: 1 == 1.0 == True; [1] == [1]; Undefined == Undefined.
bool Equal(const Value& a, const Value& b);

// The errors a render can end with. Thrown inside the interpreter only
// (the evaluator is deeply recursive and an exception unwinds it without a
// check after every call); the public API turns them into a Status.
struct RenderError {
  enum class Kind {
    kTemplate,     // raise_exception(): the template refuses the input
    kRuntime,      // TypeError, UndefinedError, ... as Jinja2 would raise
    kUnsupported,  // something Jinja2 would run and this interpreter does not
  };
  Kind kind;
  std::string message;
};

[[noreturn]] void Fail(std::string message);
[[noreturn]] void Unsupported(std::string message);

// For callables a caller adds to a template's variables (raise_exception,
// strftime_now): the i-th positional argument or the keyword `name`, else
// `fallback`.
Value Arg(Args& args, std::size_t i, const char* name, Value fallback = Value());

// `obj.name` for Python's str, dict and list methods (call the result);
// Undefined if the type has no such attribute.
Value Method(const Value& obj, const std::string& name);

}  // namespace sightline::jinja
