// The Jinja language against Jinja2 itself: each case in
// testdata/language.json (tools/testdata/chat_template_reference/
// language_cases.py) renders byte for byte as Jinja2 rendered it, and each
// template Jinja2 refuses at render is refused here with Python's message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sightline/jinja/template.h"

namespace sightline::jinja {
namespace {

nlohmann::ordered_json Cases() {
  std::ifstream in(std::string(SIGHTLINE_SOURCE_TESTDATA) + "/language.json");
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::ordered_json::parse(s.str());
}

std::string Render(const std::string& text, const Value& vars, RenderError::Kind* kind = nullptr) {
  std::unique_ptr<Template> t;
  if (Status s = Template::Parse(text, &t); !s.ok()) return "parse error: " + s.message();
  std::string out;
  if (Status s = t->Render(vars, &out, kind); !s.ok()) return "error: " + s.message();
  return out;
}

TEST(JinjaLanguage, RendersAsJinja2Does) {
  const auto j = Cases();
  const Value vars = Value::FromJson(j["vars"]);
  int exact = 0;
  for (const auto& c : j["cases"]) {
    const std::string text = c[0], want = c[1];
    const std::string got = Render(text, vars);
    if (got == want)
      ++exact;
    else
      ADD_FAILURE() << text << "\n got: " << got << "\nwant: " << want;
  }
  std::printf("language cases byte-exact: %d/%zu\n", exact, j["cases"].size());
}

TEST(JinjaLanguage, RaisesWhereJinja2Raises) {
  const auto j = Cases();
  const Value vars = Value::FromJson(j["vars"]);
  for (const auto& c : j["errors"]) {
    const std::string text = c[0], want = c[1];
    RenderError::Kind kind = RenderError::Kind::kTemplate;
    const std::string got = Render(text, vars, &kind);
    // Python's message after the exception's class name.
    const std::string message = want.substr(want.find(": ") + 2);
    EXPECT_EQ(got, "error: " + message) << text;
    EXPECT_EQ(kind, RenderError::Kind::kRuntime) << text;
  }
}

TEST(JinjaLanguage, SyntaxErrorsNameTheLine) {
  for (const char* bad : {"{% if x %}", "{{ x ", "{% for %}", "{% endfor %}", "{{ 'open }}",
                          "{# never closed", "{% break %}", "{{ x | }}", "{{ f(a=1, 2) }}",
                          "{% for x in y recursive %}{% endfor %}", "{{ *args }}"}) {
    const std::string got = Render(bad, Value::Dict());
    EXPECT_EQ(got.rfind("parse error: template syntax error, line 1", 0), 0u)
        << bad << " -> " << got;
  }
  EXPECT_NE(Render("a\nb\n{% if %}", Value::Dict()).find("line 3"), std::string::npos);
}

TEST(JinjaLanguage, RefusesWhatItLacksByName) {
  EXPECT_EQ(Render("{{ x|truncate(3) }}", Value::Dict()),
            "parse error: template syntax error, "
            "line 1: unsupported filter 'truncate'");
  EXPECT_NE(Render("{% if x is wild %}{% endif %}", Value::Dict()).find("unsupported test 'wild'"),
            std::string::npos);
  EXPECT_NE(Render("{% extends 'base' %}", Value::Dict()).find("unsupported statement 'extends'"),
            std::string::npos);
  RenderError::Kind kind = RenderError::Kind::kRuntime;
  EXPECT_EQ(Render("{{ 'a'.partition('b') }}", Value::Dict(), &kind),
            "error: method str.partition()");
  EXPECT_EQ(kind, RenderError::Kind::kUnsupported);
  EXPECT_EQ(Render("{{ '%s' % 1 }}", Value::Dict(), &kind),
            "error: printf-style string formatting ('...' % x)");
  EXPECT_EQ(kind, RenderError::Kind::kUnsupported);
  EXPECT_EQ(Render("{{ cycler(1) }}", Value::Dict(), &kind), "error: global 'cycler'");
}

TEST(JinjaLanguage, BoundsHostileTemplates) {
  EXPECT_EQ(Render("{% for i in range(1000000) %}{% endfor %}", Value::Dict()),
            "error: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  EXPECT_EQ(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", Value::Dict()),
            "error: maximum recursion depth exceeded");
  std::string deep = "1";
  for (int i = 0; i < 400; ++i) deep = "[" + deep + "]";
  EXPECT_EQ(Render("{{ " + deep + " }}", Value::Dict()), "error: maximum recursion depth exceeded");
}

}  // namespace
}  // namespace sightline::jinja
