// The expression half of the parser (Jinja2's parse_tuple through
// parse_primary: operators, filters, tests, calls, subscripts) and the token
// cursor both halves share. Internal to the interpreter: parser.cc adds the
// statements.
#pragma once

#include <string>
#include <vector>

#include "ast.h"
#include "lexer.h"

namespace sightline::jinja {

// A parse error unwinds the recursive descent; Parse() turns it into a
// Status.
struct ParseError {
  std::string message;
};

class ExprParser {
 protected:
  using T = Token::Type;
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

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

  // `| f(args) | g` with no value: for filter blocks and block sets.
  ExprPtr FilterChain();
  // `{% filter f(args) | g %}`: the first filter has no pipe.
  ExprPtr FilterBlockChain();
  // parse_tuple: `a, b` is a tuple; for-loop iterables take no `if`.
  ExprPtr Tuple(bool with_condexpr = true, bool for_iter = false, bool explicit_paren = false);
  ExprPtr Expression();
  ExprPtr Binary(ExprPtr left, const std::string& op, ExprPtr right);
  ExprPtr Or();
  ExprPtr And();
  ExprPtr Not();
  ExprPtr Compare();
  ExprPtr Math1();
  ExprPtr Concat();
  ExprPtr Math2();
  ExprPtr Pow();
  ExprPtr Unary(bool with_filter);
  ExprPtr Primary();
  ExprPtr Postfix(ExprPtr e);
  ExprPtr Subscript(ExprPtr target);
  void CallArgs(Expr* e);
  std::string DottedName();
  // parse_filter_expr: `| filter`, `is test`, and calls, left to right.
  ExprPtr Filters(ExprPtr e);

  std::vector<Token> t_;
  std::size_t i_ = 0;
  int loops_ = 0;  // for-loops open around the current statement
};

}  // namespace sightline::jinja
