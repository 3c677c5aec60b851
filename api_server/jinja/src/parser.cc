#include "parser.h"

#include <initializer_list>

#include "expr_parser.h"

namespace sightline::jinja {

namespace {

// The statements: Jinja2's subparse and parse_statement.
class Parser : public ExprParser {
 public:
  explicit Parser(std::vector<Token> tokens) : ExprParser(std::move(tokens)) {}

  Body Template() { return Subparse({}); }

 private:
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

}  // namespace sightline::jinja
