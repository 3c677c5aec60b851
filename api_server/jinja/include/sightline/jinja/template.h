// A parsed Jinja template and its renderer: Jinja2 3.1 semantics for what
// chat templates use, byte for byte, as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
// its {% generation %} tag). Globals built in: range, namespace, dict; the
// caller adds its own (raise_exception, strftime_now) to the variables.
//
// Parse refuses, naming it, any statement, filter or test this interpreter
// lacks; Render refuses, naming it, anything else it lacks (a Python method,
// a global), as RenderError::Kind::kUnsupported.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/jinja/value.h"
#include "sightline/status.h"

namespace sightline::jinja {

struct Stmt;  // the syntax tree (ast.h), private to the library

class Template {
 public:
  ~Template();

  static Status Parse(std::string_view source, std::unique_ptr<Template>* out);

  // `vars`: a dict of the template's variables. On error, *kind (if given)
  // says whose it is: the template's (raise_exception), Jinja2's runtime
  // error, or a construct this interpreter does not support.
  Status Render(const Value& vars, std::string* out, RenderError::Kind* kind = nullptr) const;

  // Whether some for-loop iterates over `x.key` or `x['key']` (through
  // filters): how vLLM tells a template that takes content-part lists.
  bool LoopsOver(std::string_view key) const;

 private:
  Template();
  std::vector<std::unique_ptr<Stmt>> body_;
};

}  // namespace sightline::jinja
