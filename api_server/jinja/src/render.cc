#include "render.h"

#include <memory>
#include <unordered_map>
#include <vector>

#include "builtins.h"
#include "pystr.h"

namespace sightline::jinja {

namespace {

// Bounds that keep a hostile or buggy template from exhausting the stack
// or memory (Jinja2's sandbox bounds range() the same way).
constexpr int kMaxDepth = 256;
constexpr std::int64_t kMaxRange = 100000;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;

  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      if (auto it = s->vars.find(name); it != s->vars.end()) return &it->second;
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

Value Range(Args& a) {
  std::int64_t start = 0, stop, step = 1;
  auto num = [](const Value& v) {
    if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
      Fail(std::string("'") + v.TypeName() + "' object cannot be interpreted as an integer");
    return v.integer();
  };
  if (a.positional.size() == 1) {
    stop = num(a.positional[0]);
  } else if (a.positional.size() == 2 || a.positional.size() == 3) {
    start = num(a.positional[0]);
    stop = num(a.positional[1]);
    if (a.positional.size() == 3) step = num(a.positional[2]);
  } else {
    Fail("range expected 1 to 3 arguments");
  }
  if (step == 0) Fail("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(out.size()) >= kMaxRange)
      Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(Value::Int(i));
  }
  return Value::List(std::move(out));
}

Value MakeDict(Args& a, bool is_namespace) {
  Value d = Value::Dict(is_namespace);
  for (const Value& p : a.positional) {
    if (!p.is_dict()) Fail("dictionary update sequence element is not a mapping");
    for (const auto& [k, v] : p.dict().items) d.dict().Set(k, v);
  }
  for (auto& [k, v] : a.keyword) d.dict().Set(k, v);
  return d;
}

class Renderer {
 public:
  explicit Renderer(const Value& vars) {
    ScopePtr globals = Child(nullptr);
    globals->vars["range"] = Value::Callable("range", Range);
    globals->vars["namespace"] = Value::Callable("namespace", [this](Args& a) {
      namespaces_.push_back(MakeDict(a, true));
      return namespaces_.back();
    });
    globals->vars["dict"] = Value::Callable("dict", [](Args& a) { return MakeDict(a, false); });
    if (vars.is_dict())
      for (const auto& [k, v] : vars.dict().items) globals->vars[k] = v;
    root_ = Child(globals);
  }

  // A render can make reference cycles: a macro closes over the scope that
  // holds it (and every macro of a scope over all of them), and a namespace
  // can hold itself or a macro. Nothing of a render outlives it (its result
  // is a string), so its end breaks them: every scope's variables and every
  // namespace's attributes are dropped. Without this, each render of a
  // template with a macro leaked its whole scope chain, the request's
  // messages included (LeakSanitizer in JinjaReference).
  ~Renderer() {
    for (const auto& weak : scopes_)
      if (const ScopePtr scope = weak.lock()) scope->vars.clear();
    for (const Value& ns : namespaces_) ns.dict().items.clear();
  }

  void Run(const Body& body, std::string* out) { Exec(body, root_, out); }

 private:
  // A new scope inside `parent` (nullptr: the outermost), remembered for the
  // destructor. Scopes already gone are forgotten now and then, so a loop of
  // many iterations keeps the list short.
  ScopePtr Child(const ScopePtr& parent) {
    auto s = std::make_shared<Scope>();
    s->parent = parent;
    if (scopes_.size() >= 2 * live_scopes_ + 64) {
      std::erase_if(scopes_, [](const std::weak_ptr<Scope>& w) { return w.expired(); });
      live_scopes_ = scopes_.size();
    }
    scopes_.push_back(s);
    return s;
  }

  Flow Exec(const Body& body, const ScopePtr& scope, std::string* out) {
    for (const auto& s : body) {
      const Flow f = ExecOne(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  std::string Capture(const Body& body, const ScopePtr& scope) {
    std::string text;
    Exec(body, scope, &text);
    return text;
  }

  Flow ExecOne(const Stmt& s, const ScopePtr& scope, std::string* out) {
    switch (s.kind) {
      case Stmt::Kind::kData:
        *out += s.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        *out += Str(Eval(*s.exprs[0], scope));
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (std::size_t i = 0; i < s.exprs.size(); ++i)
          if (Eval(*s.exprs[i], scope).Truthy()) return Exec(s.bodies[i], scope, out);
        if (s.bodies.size() > s.exprs.size()) return Exec(s.bodies.back(), scope, out);
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        For(s, scope, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet:
        Assign(s, Eval(*s.exprs[0], scope), scope);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        Value v = Value::String(Capture(s.bodies[0], Child(scope)));
        if (s.exprs[0]) v = FilterChain(*s.exprs[0], v, scope);
        scope->vars[s.targets[0]] = v;
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scope->vars[s.text] = Macro(s, scope, s.text);
        return Flow::kNormal;
      case Stmt::Kind::kCallBlock: {
        const Expr& call = *s.exprs[0];
        Value caller = MacroOf(s.params, s.exprs, 1, s.bodies[0], scope, "caller");
        Value callee = Eval(*call.args[0], scope);
        Args args = CallArgs(call, scope, 1);
        args.keyword.emplace_back("caller", caller);
        *out += Str(Invoke(callee, args));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock:
        *out += Str(FilterChain(*s.exprs[0], Value::String(Capture(s.bodies[0], scope)), scope));
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kWith: {
        ScopePtr inner = Child(scope);
        for (std::size_t i = 0; i < s.targets.size(); ++i)
          inner->vars[s.targets[i]] = Eval(*s.exprs[i], scope);
        return Exec(s.bodies[0], inner, out);
      }
      case Stmt::Kind::kScope:
        return Exec(s.bodies[0], scope, out);
    }
    return Flow::kNormal;
  }

  static void Unpack(const std::vector<std::string>& targets, const Value& v, Scope* into) {
    if (targets.size() == 1) {
      into->vars[targets[0]] = v;
      return;
    }
    const std::vector<Value> items = Iterate(v);
    if (items.size() != targets.size())
      Fail(items.size() > targets.size()
               ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
               : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                     ", got " + std::to_string(items.size()) + ")");
    for (std::size_t i = 0; i < targets.size(); ++i) into->vars[targets[i]] = items[i];
  }

  void Assign(const Stmt& s, const Value& v, const ScopePtr& scope) {
    if (s.attr.empty()) {
      Unpack(s.targets, v, scope.get());
      return;
    }
    const Value* ns = scope->Find(s.targets[0]);
    if (!ns || !ns->is_dict() || !ns->dict().is_namespace)
      Fail("cannot assign attribute on non-namespace object");
    ns->dict().Set(s.attr, v);
  }

  void For(const Stmt& s, const ScopePtr& scope, std::string* out) {
    const Value iterable = Eval(*s.exprs[0], scope);
    std::vector<Value> items = Iterate(iterable);
    if (s.exprs[1]) {  // `for x in xs if cond`: filtered before the loop, as loop.length shows
      std::vector<Value> kept;
      for (const Value& item : items) {
        ScopePtr probe = Child(scope);
        Unpack(s.targets, item, probe.get());
        if (Eval(*s.exprs[1], probe).Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      ScopePtr inner = Child(scope);
      Value loop = Value::Dict(/*is_namespace=*/true);  // attribute access only
      auto& l = loop.dict();
      l.Set("index0", Value::Int(i));
      l.Set("index", Value::Int(i + 1));
      l.Set("revindex0", Value::Int(n - i - 1));
      l.Set("revindex", Value::Int(n - i));
      l.Set("first", Value::Bool(i == 0));
      l.Set("last", Value::Bool(i == n - 1));
      l.Set("length", Value::Int(n));
      l.Set("depth", Value::Int(1));
      l.Set("depth0", Value::Int(0));
      l.Set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)]
                              : Value::Undefined("there is no previous item"));
      l.Set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)]
                                  : Value::Undefined("there is no next item"));
      l.Set("cycle", Value::Callable("loop.cycle", [i](Args& a) {
              if (a.positional.empty()) Fail("no items for cycling given");
              return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
            }));
      inner->vars["loop"] = loop;
      Unpack(s.targets, items[static_cast<std::size_t>(i)], inner.get());
      if (Exec(s.bodies[0], inner, out) == Flow::kBreak) break;
    }
    if (n == 0 && s.bodies.size() > 1) Exec(s.bodies[1], Child(scope), out);
  }

  Value Macro(const Stmt& s, const ScopePtr& scope, const std::string& name) {
    return MacroOf(s.params, s.exprs, 0, s.bodies[0], scope, name);
  }

  // A macro's parameters, their defaults (exprs[first..], null for none),
  // and its body, closed over the scope it is defined in.
  Value MacroOf(const std::vector<std::string>& params, const std::vector<ExprPtr>& exprs,
                std::size_t first, const Body& body, const ScopePtr& scope,
                const std::string& name) {
    return Value::Callable(name, [this, &params, &exprs, first, &body, scope, name](Args& a) {
      if (a.positional.size() > params.size())
        Fail("macro '" + name + "' takes not more than " + std::to_string(params.size()) +
             " argument(s)");
      ScopePtr inner = Child(scope);
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (i < a.positional.size()) {
          inner->vars[params[i]] = a.positional[i];
          continue;
        }
        const Value* kw = nullptr;
        for (auto& [k, v] : a.keyword)
          if (k == params[i]) kw = &v;
        if (kw)
          inner->vars[params[i]] = *kw;
        else if (first + i < exprs.size() && exprs[first + i])
          inner->vars[params[i]] = Eval(*exprs[first + i], inner);
        else
          inner->vars[params[i]] =
              Value::Undefined("parameter '" + params[i] + "' was not provided");
      }
      for (auto& [k, v] : a.keyword) {
        bool known = k == "caller";
        for (const auto& p : params) known |= p == k;
        if (!known) Fail("macro '" + name + "' takes no keyword argument '" + k + "'");
        if (k == "caller") inner->vars["caller"] = v;
      }
      if (++depth_ > kMaxDepth) Fail("maximum recursion depth exceeded");
      std::string text;
      Exec(body, inner, &text);
      --depth_;
      return Value::String(std::move(text));
    });
  }

  Args CallArgs(const Expr& e, const ScopePtr& scope, std::size_t first) {
    Args a;
    for (std::size_t i = first; i < e.args.size(); ++i)
      a.positional.push_back(Eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, Eval(*v, scope));
    if (e.dyn_args)
      for (Value& v : Iterate(Eval(*e.dyn_args, scope))) a.positional.push_back(std::move(v));
    if (e.dyn_kwargs) {
      const Value d = Eval(*e.dyn_kwargs, scope);
      if (!d.is_dict()) Fail("argument after ** must be a mapping");
      for (const auto& [k, v] : d.dict().items) a.keyword.emplace_back(k, v);
    }
    return a;
  }

  static Value Invoke(const Value& callee, Args& args) {
    if (callee.is_undefined()) RaiseUndefined(callee);
    if (!callee.is_callable())
      Fail(std::string("'") + callee.TypeName() + "' object is not callable");
    return callee.Call(args);
  }

  // A filter chain whose innermost value is `base` (filter blocks, block sets).
  Value FilterChain(const Expr& e, const Value& base, const ScopePtr& scope) {
    const Value v = e.args[0] ? FilterChain(*e.args[0], base, scope) : base;
    Args a = CallArgs(e, scope, 1);
    return ApplyFilter(e.name, v, a);
  }

  Value Eval(const Expr& e, const ScopePtr& scope) {
    if (++depth_ > kMaxDepth) Fail("maximum recursion depth exceeded");
    Value v = EvalInner(e, scope);
    --depth_;
    return v;
  }

  Value EvalInner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        if (const Value* v = scope->Find(e.name)) return *v;
        if (e.name == "lipsum" || e.name == "cycler" || e.name == "joiner")
          Unsupported("global '" + e.name + "'");
        return Value::Undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(Eval(*a, scope));
        return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Value d = Value::Dict();
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = Eval(*e.args[i], scope);
          if (!k.is_string()) Unsupported("dict keys that are not strings");
          d.dict().Set(k.str(), Eval(*e.args[i + 1], scope));
        }
        return d;
      }
      case Expr::Kind::kGetAttr:
        return GetAttr(Eval(*e.args[0], scope), e.name);
      case Expr::Kind::kGetItem:
        return GetItem(Eval(*e.args[0], scope), Eval(*e.args[1], scope));
      case Expr::Kind::kSlice: {
        auto opt = [&](const ExprPtr& p) { return p ? Eval(*p, scope) : Value::None(); };
        return SliceOf(Eval(*e.args[0], scope), opt(e.args[1]), opt(e.args[2]), opt(e.args[3]));
      }
      case Expr::Kind::kCall: {
        const Value callee = Eval(*e.args[0], scope);
        Args a = CallArgs(e, scope, 1);
        return Invoke(callee, a);
      }
      case Expr::Kind::kFilter: {
        const Value v = Eval(*e.args[0], scope);
        Args a = CallArgs(e, scope, 1);
        return ApplyFilter(e.name, v, a);
      }
      case Expr::Kind::kTest: {
        const Value v = Eval(*e.args[0], scope);
        Args a = CallArgs(e, scope, 1);
        return Value::Bool(ApplyTest(e.name, v, a));
      }
      case Expr::Kind::kUnary: {
        const Value v = Eval(*e.args[0], scope);
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (v.is_undefined()) RaiseUndefined(v);
        if (!v.is_number())
          Fail(std::string("bad operand type for unary ") + e.name + ": '" + v.TypeName() + "'");
        if (e.name == "+") return v.kind() == Value::Kind::kBool ? Value::Int(v.integer()) : v;
        return v.kind() == Value::Kind::kFloat ? Value::Float(-v.number())
                                               : Value::Int(-v.integer());
      }
      case Expr::Kind::kBinary: {
        const Value a = Eval(*e.args[0], scope);
        if (e.name == "and") return a.Truthy() ? Eval(*e.args[1], scope) : a;
        if (e.name == "or") return a.Truthy() ? a : Eval(*e.args[1], scope);
        return Binary(e.name, a, Eval(*e.args[1], scope));
      }
      case Expr::Kind::kCompare: {
        Value left = Eval(*e.args[0], scope);
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          Value right = Eval(*e.args[i + 1], scope);
          if (!Compare(e.ops[i], left, right)) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kCondExpr:
        if (Eval(*e.args[1], scope).Truthy()) return Eval(*e.args[0], scope);
        if (e.args[2]) return Eval(*e.args[2], scope);
        return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  ScopePtr root_;
  int depth_ = 0;
  std::vector<std::weak_ptr<Scope>> scopes_;  // every scope made, for ~Renderer
  std::size_t live_scopes_ = 0;               // scopes_'s size after its last pruning
  std::vector<Value> namespaces_;             // every namespace() made, for ~Renderer
};

}  // namespace

void RenderBody(const Body& body, const Value& vars, std::string* out) {
  Renderer(vars).Run(body, out);
}

}  // namespace sightline::jinja
