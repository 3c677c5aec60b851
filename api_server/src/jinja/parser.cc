#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/builtins.h"
#include "jinja/lexer.h"

namespace sightline::api::jinja {

namespace {

using T = Token::Type;

// A parse error unwinds the recursive descent; Parse() turns it into a
// Status.
struct ParseError {
  std::string message;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body Template() {
    Body body = Subparse({});
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Look(std::size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  bool IsOp(const char* op) const { return Cur().type == T::kOperator && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == T::kName && Cur().text == name; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    ++i_;
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void Error(const std::string& what) const {
    throw ParseError{"template syntax error, line " + std::to_string(Cur().line) + ": " + what};
  }
  std::string Describe() const {
    switch (Cur().type) {
      case T::kBlockEnd:
        return "end of statement block";
      case T::kVariableEnd:
        return "end of print statement";
      case T::kEof:
        return "end of template";
      default:
        return "'" + Cur().text + "'";
    }
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Error(std::string("expected '") + op + "', got " + Describe());
  }
  void Expect(T type, const char* what) {
    if (Cur().type != type) Error(std::string("expected ") + what + ", got " + Describe());
    ++i_;
  }
  std::string ExpectName() {
    if (Cur().type != T::kName) Error("expected a name, got " + Describe());
    return t_[i_++].text;
  }
  ExprPtr Node(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = Cur().line;
    return e;
  }

  // Statements up to a `{% name %}` in `ends` (left unconsumed: i_ at the
  // name), or the end of the template when `ends` is empty.
  Body Subparse(std::initializer_list<const char*> ends) {
    Body body;
    while (true) {
      switch (Cur().type) {
        case T::kEof:
          if (ends.size() != 0)
            Error(std::string("unexpected end of template, expected '") + *ends.begin() + "'");
          return body;
        case T::kData: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kData;
          s->text = t_[i_++].text;
          body.push_back(std::move(s));
          break;
        }
        case T::kVariableBegin: {
          ++i_;
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kOutput;
          s->line = Cur().line;
          s->exprs.push_back(Tuple());
          Expect(T::kVariableEnd, "end of print statement");
          body.push_back(std::move(s));
          break;
        }
        case T::kBlockBegin: {
          ++i_;
          for (const char* end : ends)
            if (IsName(end)) return body;
          body.push_back(Statement());
          break;
        }
        default:
          Error("unexpected " + Describe());
      }
    }
  }

  void EndTag() { Expect(T::kBlockEnd, "end of statement block"); }

  std::unique_ptr<Stmt> NewStmt(Stmt::Kind k) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = Cur().line;
    return s;
  }

  std::unique_ptr<Stmt> Statement() {
    if (Cur().type != T::kName) Error("tag name expected");
    const std::string tag = Cur().text;
    if (tag == "if") return If();
    if (tag == "for") return For();
    if (tag == "set") return Set();
    if (tag == "macro") return Macro();
    if (tag == "call") return CallBlock();
    if (tag == "filter") return FilterBlock();
    if (tag == "with") return With();
    if (tag == "generation") return Generation();
    if (tag == "break" || tag == "continue") {
      if (loops_ == 0) Error("'" + tag + "' outside of a loop");
      auto s = NewStmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue);
      ++i_;
      EndTag();
      return s;
    }
    Error("unsupported statement '" + tag + "'");
  }

  std::unique_ptr<Stmt> If() {
    auto s = NewStmt(Stmt::Kind::kIf);
    ++i_;
    while (true) {
      s->exprs.push_back(Tuple(false));
      EndTag();
      s->bodies.push_back(Subparse({"elif", "else", "endif"}));
      const std::string t = t_[i_++].text;
      if (t == "elif") continue;
      if (t == "else") {
        EndTag();
        s->bodies.push_back(Subparse({"endif"}));
        ++i_;
      }
      EndTag();
      return s;
    }
  }

  // Assignment targets: a name, `a, b`, `(a, b)`; with `ns`: also `ns.attr`.
  void Targets(Stmt* s, bool with_namespace) {
    if (with_namespace && Cur().type == T::kName && Look().type == T::kOperator &&
        Look().text == ".") {
      s->targets.push_back(t_[i_].text);
      i_ += 2;
      s->attr = ExpectName();
      return;
    }
    const bool paren = SkipOp("(");
    do {
      if (paren && IsOp(")")) break;
      s->targets.push_back(ExpectName());
    } while (SkipOp(","));
    if (paren) ExpectOp(")");
  }

  std::unique_ptr<Stmt> For() {
    auto s = NewStmt(Stmt::Kind::kFor);
    ++i_;
    Targets(s.get(), false);
    if (!SkipName("in")) Error("expected 'in', got " + Describe());
    s->exprs.push_back(Tuple(false, /*for_iter=*/true));
    if (SkipName("if"))
      s->exprs.push_back(Expression());
    else
      s->exprs.push_back(nullptr);
    if (IsName("recursive")) Error("unsupported: recursive for loops");
    EndTag();
    ++loops_;
    s->bodies.push_back(Subparse({"endfor", "else"}));
    --loops_;
    if (t_[i_++].text == "else") {
      EndTag();
      s->bodies.push_back(Subparse({"endfor"}));
      ++i_;
    }
    EndTag();
    return s;
  }

  std::unique_ptr<Stmt> Set() {
    auto s = NewStmt(Stmt::Kind::kSet);
    ++i_;
    Targets(s.get(), true);
    if (SkipOp("=")) {
      s->exprs.push_back(Tuple());
      EndTag();
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) Error("expected '='");
    s->kind = Stmt::Kind::kSetBlock;
    s->exprs.push_back(IsOp("|") ? FilterChain() : nullptr);
    EndTag();
    s->bodies.push_back(Subparse({"endset"}));
    ++i_;
    EndTag();
    return s;
  }

  std::unique_ptr<Stmt> Macro() {
    auto s = NewStmt(Stmt::Kind::kMacro);
    ++i_;
    s->text = ExpectName();
    Signature(s.get());
    EndTag();
    const int loops = loops_;
    loops_ = 0;
    s->bodies.push_back(Subparse({"endmacro"}));
    loops_ = loops;
    ++i_;
    EndTag();
    return s;
  }

  void Signature(Stmt* s) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!s->params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      s->params.push_back(ExpectName());
      if (SkipOp("="))
        s->exprs.push_back(Expression());
      else if (!s->exprs.empty() && s->exprs.back())
        Error("non-default argument follows default argument");
      else
        s->exprs.push_back(nullptr);
    }
    ++i_;
  }

  std::unique_ptr<Stmt> CallBlock() {
    auto s = NewStmt(Stmt::Kind::kCallBlock);
    ++i_;
    auto defaults = std::make_unique<Stmt>();
    if (IsOp("(")) Signature(defaults.get());
    s->params = std::move(defaults->params);
    ExprPtr call = Expression();
    if (call->kind != Expr::Kind::kCall) Error("expected call");
    s->exprs.push_back(std::move(call));
    for (auto& d : defaults->exprs) s->exprs.push_back(std::move(d));
    EndTag();
    s->bodies.push_back(Subparse({"endcall"}));
    ++i_;
    EndTag();
    return s;
  }

  std::unique_ptr<Stmt> FilterBlock() {
    auto s = NewStmt(Stmt::Kind::kFilterBlock);
    ++i_;
    s->exprs.push_back(FilterBlockChain());
    EndTag();
    s->bodies.push_back(Subparse({"endfilter"}));
    ++i_;
    EndTag();
    return s;
  }

  std::unique_ptr<Stmt> With() {
    auto s = NewStmt(Stmt::Kind::kWith);
    ++i_;
    while (Cur().type != T::kBlockEnd) {
      if (!s->targets.empty()) ExpectOp(",");
      s->targets.push_back(ExpectName());
      ExpectOp("=");
      s->exprs.push_back(Expression());
    }
    EndTag();
    s->bodies.push_back(Subparse({"endwith"}));
    ++i_;
    EndTag();
    return s;
  }

  // transformers' AssistantTracker: {% generation %} marks assistant text
  // for training masks and renders its body unchanged.
  std::unique_ptr<Stmt> Generation() {
    auto s = NewStmt(Stmt::Kind::kScope);
    ++i_;
    EndTag();
    s->bodies.push_back(Subparse({"endgeneration"}));
    ++i_;
    EndTag();
    return s;
  }

  // `| f(args) | g` with no value: for filter blocks and block sets.
  ExprPtr FilterChain() {
    if (!IsOp("|")) Error("expected a filter, got " + Describe());
    return Filters(nullptr);
  }

  // `{% filter f(args) | g %}`: the first filter has no pipe.
  ExprPtr FilterBlockChain() {
    auto f = Node(Expr::Kind::kFilter);
    f->name = DottedName();
    if (Status s = CheckFilter(f->name); !s.ok()) Error(s.message());
    f->args.push_back(nullptr);
    if (IsOp("(")) CallArgs(f.get());
    return Filters(std::move(f));
  }

  // parse_tuple: `a, b` is a tuple; for-loop iterables take no `if`.
  ExprPtr Tuple(bool with_condexpr = true, bool for_iter = false, bool explicit_paren = false) {
    auto tuple = Node(Expr::Kind::kTuple);
    bool is_tuple = false;
    while (true) {
      if (!tuple->args.empty()) ExpectOp(",");
      if (Cur().type == T::kVariableEnd || Cur().type == T::kBlockEnd || IsOp(")") ||
          (for_iter && IsName("recursive")))
        break;
      tuple->args.push_back(with_condexpr ? Expression() : Or());
      if (IsOp(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!tuple->args.empty()) return std::move(tuple->args[0]);
      if (!explicit_paren) Error("expected an expression, got " + Describe());
    }
    return tuple;
  }

  ExprPtr Expression() {
    ExprPtr e = Or();
    while (SkipName("if")) {
      auto c = Node(Expr::Kind::kCondExpr);
      ExprPtr test = Or();
      ExprPtr otherwise = SkipName("else") ? Expression() : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Binary(ExprPtr left, const std::string& op, ExprPtr right) {
    auto b = Node(Expr::Kind::kBinary);
    b->name = op;
    b->args.push_back(std::move(left));
    b->args.push_back(std::move(right));
    return b;
  }

  ExprPtr Or() {
    ExprPtr e = And();
    while (SkipName("or")) e = Binary(std::move(e), "or", And());
    return e;
  }
  ExprPtr And() {
    ExprPtr e = Not();
    while (SkipName("and")) e = Binary(std::move(e), "and", Not());
    return e;
  }
  ExprPtr Not() {
    if (SkipName("not")) {
      auto n = Node(Expr::Kind::kUnary);
      n->name = "not";
      n->args.push_back(Not());
      return n;
    }
    return Compare();
  }
  ExprPtr Compare() {
    ExprPtr first = Math1();
    auto c = Node(Expr::Kind::kCompare);
    c->args.push_back(std::move(first));
    while (true) {
      if (Cur().type == T::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        c->ops.push_back(t_[i_++].text);
      } else if (SkipName("in")) {
        c->ops.push_back("in");
      } else if (IsName("not") && Look().type == T::kName && Look().text == "in") {
        i_ += 2;
        c->ops.push_back("not in");
      } else {
        break;
      }
      c->args.push_back(Math1());
    }
    if (c->ops.empty()) return std::move(c->args[0]);
    return c;
  }
  ExprPtr Math1() {
    ExprPtr e = Concat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = t_[i_++].text;
      e = Binary(std::move(e), op, Concat());
    }
    return e;
  }
  ExprPtr Concat() {
    ExprPtr e = Math2();
    while (SkipOp("~")) e = Binary(std::move(e), "~", Math2());
    return e;
  }
  ExprPtr Math2() {
    ExprPtr e = Pow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = t_[i_++].text;
      e = Binary(std::move(e), op, Pow());
    }
    return e;
  }
  ExprPtr Pow() {
    ExprPtr e = Unary(true);
    while (SkipOp("**")) e = Binary(std::move(e), "**", Unary(true));
    return e;
  }
  ExprPtr Unary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Node(Expr::Kind::kUnary);
      e->name = t_[i_++].text;
      e->args.push_back(Unary(false));
    } else {
      e = Primary();
    }
    e = Postfix(std::move(e));
    if (with_filter) e = Filters(std::move(e));
    return e;
  }

  ExprPtr Primary() {
    const Token& tok = Cur();
    switch (tok.type) {
      case T::kName: {
        ++i_;
        auto e = Node(Expr::Kind::kLiteral);
        if (tok.text == "true" || tok.text == "True") {
          e->literal = Value::Bool(true);
        } else if (tok.text == "false" || tok.text == "False") {
          e->literal = Value::Bool(false);
        } else if (tok.text == "none" || tok.text == "None") {
          e->literal = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = tok.text;
        }
        return e;
      }
      case T::kString: {
        auto e = Node(Expr::Kind::kLiteral);
        std::string s;
        while (Cur().type == T::kString) s += t_[i_++].text;
        e->literal = Value::String(std::move(s));
        return e;
      }
      case T::kInteger:
      case T::kFloat: {
        auto e = Node(Expr::Kind::kLiteral);
        try {
          e->literal = tok.type == T::kInteger ? Value::Int(std::stoll(tok.text))
                                               : Value::Float(std::stod(tok.text));
        } catch (const std::exception&) {
          Error("number out of range: " + tok.text);
        }
        ++i_;
        return e;
      }
      case T::kOperator:
        if (SkipOp("(")) {
          ExprPtr e = Tuple(true, false, true);
          ExpectOp(")");
          return e;
        }
        if (SkipOp("[")) {
          auto e = Node(Expr::Kind::kList);
          while (!IsOp("]")) {
            if (!e->args.empty()) ExpectOp(",");
            if (IsOp("]")) break;
            e->args.push_back(Expression());
          }
          ++i_;
          return e;
        }
        if (SkipOp("{")) {
          auto e = Node(Expr::Kind::kDict);
          while (!IsOp("}")) {
            if (!e->args.empty()) ExpectOp(",");
            if (IsOp("}")) break;
            e->args.push_back(Expression());
            ExpectOp(":");
            e->args.push_back(Expression());
          }
          ++i_;
          return e;
        }
        break;
      default:
        break;
    }
    Error("unexpected " + Describe());
  }

  ExprPtr Postfix(ExprPtr e) {
    while (true) {
      if (SkipOp(".")) {
        if (Cur().type == T::kInteger) {
          auto g = Node(Expr::Kind::kGetItem);
          auto k = Node(Expr::Kind::kLiteral);
          k->literal = Value::Int(std::stoll(t_[i_++].text));
          g->args.push_back(std::move(e));
          g->args.push_back(std::move(k));
          e = std::move(g);
          continue;
        }
        auto g = Node(Expr::Kind::kGetAttr);
        g->name = ExpectName();
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (SkipOp("[")) {
        e = Subscript(std::move(e));
      } else if (IsOp("(")) {
        auto c = Node(Expr::Kind::kCall);
        c->args.push_back(std::move(e));
        CallArgs(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr Subscript(ExprPtr target) {
    std::vector<ExprPtr> parts(1);
    bool slice = false;
    while (!IsOp("]")) {
      if (SkipOp(":")) {
        slice = true;
        if (parts.size() == 3) Error("too many ':' in a slice");
        parts.emplace_back();
        continue;
      }
      if (IsOp(",")) Error("unsupported: tuple subscripts");
      if (parts.back()) Error("expected ']', got " + Describe());
      parts.back() = Expression();
    }
    ++i_;
    if (!slice) {
      if (!parts[0]) Error("expected a subscript");
      auto g = Node(Expr::Kind::kGetItem);
      g->args.push_back(std::move(target));
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = Node(Expr::Kind::kSlice);
    s->args.push_back(std::move(target));
    parts.resize(3);
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  void CallArgs(Expr* e) {
    ExpectOp("(");
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (IsOp(")")) break;
      if (SkipOp("*")) {
        if (e->dyn_args) Error("only one *args in a call");
        e->dyn_args = Expression();
        continue;
      }
      if (SkipOp("**")) {
        if (e->dyn_kwargs) Error("only one **kwargs in a call");
        e->dyn_kwargs = Expression();
        continue;
      }
      if (Cur().type == T::kName && Look().type == T::kOperator && Look().text == "=") {
        std::string key = t_[i_].text;
        i_ += 2;
        e->kwargs.emplace_back(std::move(key), Expression());
      } else {
        if (!e->kwargs.empty()) Error("positional argument after keyword argument");
        e->args.push_back(Expression());
      }
    }
    ++i_;
  }

  std::string DottedName() {
    std::string name = ExpectName();
    while (IsOp(".") && Look().type == T::kName) {
      ++i_;
      name += "." + ExpectName();
    }
    return name;
  }

  // parse_filter_expr: `| filter`, `is test`, and calls, left to right.
  ExprPtr Filters(ExprPtr e) {
    while (true) {
      if (SkipOp("|")) {
        auto f = Node(Expr::Kind::kFilter);
        f->name = DottedName();
        if (Status s = CheckFilter(f->name); !s.ok()) Error(s.message());
        f->args.push_back(std::move(e));
        if (IsOp("(")) CallArgs(f.get());
        e = std::move(f);
      } else if (SkipName("is")) {
        const bool negated = SkipName("not");
        auto t = Node(Expr::Kind::kTest);
        t->name = DottedName();
        if (Status s = CheckTest(t->name); !s.ok()) Error(s.message());
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          CallArgs(t.get());
        } else if ((Cur().type == T::kName || Cur().type == T::kString ||
                    Cur().type == T::kInteger || Cur().type == T::kFloat || IsOp("(") ||
                    IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Error("you cannot chain multiple tests with is");
          t->args.push_back(Postfix(Primary()));
        }
        e = std::move(t);
        if (negated) {
          auto n = Node(Expr::Kind::kUnary);
          n->name = "not";
          n->args.push_back(std::move(e));
          e = std::move(n);
        }
      } else if (IsOp("(")) {
        auto c = Node(Expr::Kind::kCall);
        c->args.push_back(std::move(e));
        CallArgs(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  int loops_ = 0;
};

}  // namespace

Status Parse(std::string_view source, Body* out) {
  std::vector<Token> tokens;
  if (Status s = Tokenize(source, &tokens); !s.ok()) return s;
  try {
    *out = Parser(std::move(tokens)).Template();
  } catch (const ParseError& e) {
    return Status::InvalidArgument(e.message);
  }
  return Status::Ok();
}

}  // namespace sightline::api::jinja
