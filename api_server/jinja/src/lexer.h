// Jinja2's lexer with the settings transformers uses: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, default delimiters. The text
// between tags becomes data tokens with Jinja2's whitespace rules already
// applied (`-` strips, `+` keeps, lstrip_blocks strips a block or comment
// tag's indentation but not a `{{`'s), so the parser never sees them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::jinja {

struct Token {
  enum class Type {
    kData,
    kVariableBegin,
    kVariableEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,  // text: the unescaped value
    kInteger,
    kFloat,
    kOperator,  // text: "+", "//", "==", "(", ...
    kEof,
  };
  Type type;
  std::string text;
  int line;
};

Status Tokenize(std::string_view source, std::vector<Token>* out);

}  // namespace sightline::jinja
