// Jinja2's grammar (its parser.py, production by production) over the
// lexer's tokens. Filters and tests are looked up while parsing, so that a
// template naming one this interpreter lacks fails at start-up, naming it,
// as does any statement other than those a chat template uses.
#pragma once

#include <string_view>

#include "ast.h"
#include "sightline/status.h"

namespace sightline::jinja {

Status Parse(std::string_view source, Body* out);

}  // namespace sightline::jinja
