// The syntax tree of a parsed template: expressions and statements as the
// Jinja2 parser builds them (its node names in the comments).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sightline/jinja/value.h"

namespace sightline::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // Const: `literal`
    kName,      // Name: `name`
    kList,      // List: `args`
    kTuple,     // Tuple: `args`
    kDict,      // Dict: `args` as key, value, key, value...
    kGetAttr,   // Getattr: args[0] . name
    kGetItem,   // Getitem: args[0] [ args[1] ]
    kSlice,     // Getitem with Slice: args[0] [ args[1] : args[2] : args[3] ] (each may be null)
    kCall,      // Call: args[0] ( args[1..], kwargs )
    kFilter,    // Filter: name, value args[0] (null in a filter block), args[1..], kwargs
    kTest,      // Test: name, args[0], args[1..], kwargs
    kUnary,     // Neg / Pos / Not: name is "-", "+", "not"
    kBinary,    // Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat (~), And, Or: name is the operator
    kCompare,   // Compare: args[0] ops[0] args[1] ops[1] args[2]...
    kCondExpr,  // CondExpr: args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  ExprPtr dyn_args, dyn_kwargs;  // a call's *args and **kwargs
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kData,         // template text: `text`
    kOutput,       // {{ exprs[0] }}
    kIf,           // exprs: conditions; bodies: one per condition, then else if present
    kFor,          // targets in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
    kSet,          // targets (or targets[0].attr) = exprs[0]
    kSetBlock,     // targets[0] = body rendered [| exprs[0] (filter chain)]
    kMacro,        // text: name; params, exprs: defaults (null if none); bodies[0]
    kCallBlock,    // exprs[0]: the call; params: caller's; bodies[0]: caller
    kFilterBlock,  // exprs[0]: the filter chain; bodies[0]
    kBreak,
    kContinue,
    kWith,   // targets = exprs (each); bodies[0] in a new scope
    kScope,  // {% generation %}: bodies[0] as is
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string attr;  // kSet on a namespace: targets[0].attr
  std::vector<std::string> targets;
  std::vector<std::string> params;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace sightline::jinja
