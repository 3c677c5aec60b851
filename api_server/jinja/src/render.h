// The evaluator behind Template::Render: statements and expressions over
// a chain of scopes as Jinja2 scopes them (a for-loop iteration and a macro
// call are scopes, an if is not; a macro sees its defining scope as it is
// when called).
#pragma once

#include <string>

#include "ast.h"
#include "sightline/jinja/value.h"

namespace sightline::jinja {

// Throws RenderError.
void RenderBody(const Body& body, const Value& vars, std::string* out);

}  // namespace sightline::jinja
