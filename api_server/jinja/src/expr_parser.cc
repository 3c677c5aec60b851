#include "expr_parser.h"

#include "builtins.h"

namespace sightline::jinja {

ExprPtr ExprParser::FilterChain() {
  if (!IsOp("|")) Error("expected a filter, got " + Describe());
  return Filters(nullptr);
}

ExprPtr ExprParser::FilterBlockChain() {
  auto f = Node(Expr::Kind::kFilter);
  f->name = DottedName();
  if (Status s = CheckFilter(f->name); !s.ok()) Error(s.message());
  f->args.push_back(nullptr);
  if (IsOp("(")) CallArgs(f.get());
  return Filters(std::move(f));
}

ExprPtr ExprParser::Tuple(bool with_condexpr, bool for_iter, bool explicit_paren) {
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

ExprPtr ExprParser::Expression() {
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

ExprPtr ExprParser::Binary(ExprPtr left, const std::string& op, ExprPtr right) {
  auto b = Node(Expr::Kind::kBinary);
  b->name = op;
  b->args.push_back(std::move(left));
  b->args.push_back(std::move(right));
  return b;
}

ExprPtr ExprParser::Or() {
  ExprPtr e = And();
  while (SkipName("or")) e = Binary(std::move(e), "or", And());
  return e;
}

ExprPtr ExprParser::And() {
  ExprPtr e = Not();
  while (SkipName("and")) e = Binary(std::move(e), "and", Not());
  return e;
}

ExprPtr ExprParser::Not() {
  if (SkipName("not")) {
    auto n = Node(Expr::Kind::kUnary);
    n->name = "not";
    n->args.push_back(Not());
    return n;
  }
  return Compare();
}

ExprPtr ExprParser::Compare() {
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

ExprPtr ExprParser::Math1() {
  ExprPtr e = Concat();
  while (IsOp("+") || IsOp("-")) {
    const std::string op = t_[i_++].text;
    e = Binary(std::move(e), op, Concat());
  }
  return e;
}

ExprPtr ExprParser::Concat() {
  ExprPtr e = Math2();
  while (SkipOp("~")) e = Binary(std::move(e), "~", Math2());
  return e;
}

ExprPtr ExprParser::Math2() {
  ExprPtr e = Pow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = t_[i_++].text;
    e = Binary(std::move(e), op, Pow());
  }
  return e;
}

ExprPtr ExprParser::Pow() {
  ExprPtr e = Unary(true);
  while (SkipOp("**")) e = Binary(std::move(e), "**", Unary(true));
  return e;
}

ExprPtr ExprParser::Unary(bool with_filter) {
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

ExprPtr ExprParser::Primary() {
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

ExprPtr ExprParser::Postfix(ExprPtr e) {
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

ExprPtr ExprParser::Subscript(ExprPtr target) {
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

void ExprParser::CallArgs(Expr* e) {
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

std::string ExprParser::DottedName() {
  std::string name = ExpectName();
  while (IsOp(".") && Look().type == T::kName) {
    ++i_;
    name += "." + ExpectName();
  }
  return name;
}

ExprPtr ExprParser::Filters(ExprPtr e) {
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
      } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInteger ||
                  Cur().type == T::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
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

}  // namespace sightline::jinja
