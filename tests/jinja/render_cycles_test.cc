// What a render can tie in knots, it unties when it ends: a macro closes over
// the scope that holds it, a namespace can hold itself or a macro. Each
// render below leaves a cycle behind unless the renderer breaks it; the
// sanitizer step (LeakSanitizer, `ctest -L sanitize` in build-asan) fails on
// any of them. Here, without it, each must still render what Jinja2 renders.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sightline/jinja/template.h"
#include "sightline/jinja/value.h"

namespace sightline::jinja {
namespace {

std::string Render(const std::string& source) {
  std::unique_ptr<Template> t;
  if (Status s = Template::Parse(source, &t); !s.ok()) return "parse: " + s.message();
  Value vars = Value::Dict();
  vars.dict().Set(
      "messages",
      Value::FromJson(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])")));
  std::string out;
  if (Status s = t->Render(vars, &out); !s.ok()) return "render: " + s.message();
  return out;
}

TEST(RenderCycles, AMacroInTheScopeThatHoldsIt) {
  for (int i = 0; i < 3; ++i)  // the same template again: nothing carried over
    EXPECT_EQ(Render("{% macro m(x) %}[{{ x }}]{% endmacro %}"
                     "{% for msg in messages %}{{ m(msg.content) }}{% endfor %}"),
              "[hi]");
}

TEST(RenderCycles, MacrosCallingEachOtherAndThemselves) {
  EXPECT_EQ(Render("{% macro a(n) %}{% if n > 0 %}a{{ b(n - 1) }}{% endif %}{% endmacro %}"
                   "{% macro b(n) %}{% if n > 0 %}b{{ a(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ a(4) }}"),
            "abab");
}

TEST(RenderCycles, ANamespaceHoldingItselfAndAMacro) {
  EXPECT_EQ(Render("{% set ns = namespace(n=1) %}{% set ns.me = ns %}"
                   "{% macro m() %}{{ ns.me.n }}{% endmacro %}{% set ns.m = m %}{{ ns.m() }}"),
            "1");
}

TEST(RenderCycles, AMacroDefinedInALoopBody) {
  EXPECT_EQ(Render("{% for msg in messages %}{% macro say() %}{{ msg.role }}{% endmacro %}"
                   "{{ say() }}{% endfor %}"),
            "user");
}

TEST(RenderCycles, ARenderThatFailsUntiesToo) {
  EXPECT_EQ(Render("{% macro m() %}{{ raise_it() }}{% endmacro %}{{ m() }}").rfind("render: ", 0),
            0u);
}

}  // namespace
}  // namespace sightline::jinja
