#include "sightline/jinja/template.h"

#include "ast.h"
#include "parser.h"
#include "render.h"

namespace sightline::jinja {

Template::Template() = default;
Template::~Template() = default;

Status Template::Parse(std::string_view source, std::unique_ptr<Template>* out) {
  auto t = std::unique_ptr<Template>(new Template());
  if (Status s = jinja::Parse(source, &t->body_); !s.ok()) return s;
  *out = std::move(t);
  return Status::Ok();
}

Status Template::Render(const Value& vars, std::string* out, RenderError::Kind* kind) const {
  std::string text;
  try {
    RenderBody(body_, vars, &text);
  } catch (const RenderError& e) {
    if (kind) *kind = e.kind;
    return Status::InvalidArgument(e.message);
  }
  *out = std::move(text);
  return Status::Ok();
}

namespace {

bool Accesses(const Expr& e, std::string_view key) {
  if (e.kind == Expr::Kind::kFilter && e.args[0]) return Accesses(*e.args[0], key);
  if (e.kind == Expr::Kind::kGetAttr) return e.name == key;
  return e.kind == Expr::Kind::kGetItem && e.args[1]->kind == Expr::Kind::kLiteral &&
         e.args[1]->literal.is_string() && e.args[1]->literal.str() == key;
}

bool Loops(const Body& body, std::string_view key) {
  for (const auto& s : body) {
    if (s->kind == Stmt::Kind::kFor && Accesses(*s->exprs[0], key)) return true;
    for (const Body& b : s->bodies)
      if (Loops(b, key)) return true;
  }
  return false;
}

}  // namespace

bool Template::LoopsOver(std::string_view key) const {
  return Loops(body_, key);
}

}  // namespace sightline::jinja
