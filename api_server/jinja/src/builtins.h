// What expressions do to values, as Jinja2's sandboxed environment does it
// on Python objects: attribute and item access (a dict's methods shadow its
// keys for `.`, keys shadow methods for `[]`), slicing, iteration, len(),
// operators, comparisons, the Python methods of str, dict and list, and the
// built-in filters and tests. Each raises (RenderError) where Python would.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/jinja/value.h"
#include "sightline/status.h"

namespace sightline::jinja {

// ops.cc
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);
Value SliceOf(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::vector<Value> Iterate(const Value& v);  // for-loops, list(), join...
std::int64_t Length(const Value& v);
Value Binary(const std::string& op, const Value& a, const Value& b);
bool Compare(const std::string& op, const Value& a, const Value& b);
bool Less(const Value& a, const Value& b);  // Python `<`; TypeError across types
[[noreturn]] void RaiseUndefined(const Value& undefined);
Value UndefinedMember(const Value& obj, const Value& key);

// methods.cc: Method (in value.h).

// filters.cc / tests.cc. Check*: Ok, or why the name cannot be used
// (unknown to Jinja2, or one this interpreter lacks), for the parser.
Status CheckFilter(std::string_view name);
Status CheckTest(std::string_view name);
Value ApplyFilter(const std::string& name, const Value& v, Args& args);
bool ApplyTest(const std::string& name, const Value& v, Args& args);

// Arguments of built-ins: Arg (in value.h).

}  // namespace sightline::jinja
