// Every real chat template in testdata/chat_templates/ rendered for every
// reference conversation, byte for byte against Jinja2 with transformers'
// settings (tools/testdata/chat_template_reference/render.py); a conversation the
// template refuses in Jinja2 must be refused here too.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "openai/chat_render.h"
#include "openai/chat_template.h"
#include "openai/chat_tools.h"

namespace sightline::api {
namespace {

const std::string kTemplateDir = std::string(SIGHTLINE_SOURCE_TESTDATA) + "/chat_templates/";

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// render.py's fixed clock: 2024-07-26 10:00:00.
std::tm FixedClock() {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 10;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

TEST(JinjaReference, EveryTemplateAndConversationMatchesJinja2) {
  const auto sources = nlohmann::json::parse(Read(kTemplateDir + "sources.json"));
  const auto expected = nlohmann::ordered_json::parse(Read(kTemplateDir + "expected.json"));
  const auto& conversations = expected["conversations"];
  int renders = 0, exact = 0, refusals = 0, refused_too = 0;
  std::vector<std::string> misses;
  for (const auto& [name, src] : sources.items()) {
    ChatTemplate::Options options;
    if (src["bos_token"].is_string()) options.bos_token = src["bos_token"];
    if (src["eos_token"].is_string()) options.eos_token = src["eos_token"];
    options.clock = FixedClock;
    std::shared_ptr<const ChatTemplate> t;
    const Status loaded = ChatTemplate::Create(
        name, {{"default", Read(kTemplateDir + name + ".jinja")}}, options, &t);
    for (const auto& [cname, conv] : conversations.items()) {
      const auto& want = expected["renders"][name + "__" + cname];
      const bool want_error = want.contains("error");
      (want_error ? refusals : renders)++;
      if (!loaded.ok()) {
        misses.push_back(name + "__" + cname + ": not loaded: " + loaded.message());
        continue;
      }
      ChatInput in;
      in.messages = conv["messages"];
      // Tools as the chat endpoint reads them (vLLM's model_dump shape).
      RequestError e;
      const nlohmann::json body = conv;
      ASSERT_TRUE(ReadTools(Fields(body, "", &e), conv.value("tools", nlohmann::ordered_json()),
                            &in.tools, &e))
          << cname << ": " << e.message;
      if (conv.contains("documents")) in.documents = conv["documents"];
      if (conv.contains("chat_template_kwargs")) in.kwargs = conv["chat_template_kwargs"];
      in.add_generation_prompt = conv.value("add_generation_prompt", true);
      in.continue_final_message = conv.value("continue_final_message", false);
      std::string got;
      const Status s = RenderChat(*t, in, &got);
      if (want_error) {
        if (!s.ok())
          ++refused_too;
        else
          misses.push_back(name + "__" + cname + ": rendered, Jinja2 raised " +
                           want["error"].get<std::string>());
      } else if (!s.ok()) {
        misses.push_back(name + "__" + cname + ": " + s.message());
      } else if (got != want["output"].get<std::string>()) {
        misses.push_back(name + "__" + cname + ": differs\n--- got\n" + got + "\n--- want\n" +
                         want["output"].get<std::string>());
      } else {
        ++exact;
      }
    }
  }
  std::printf("chat templates: %zu; renders byte-exact %d/%d; Jinja2 refusals refused %d/%d\n",
              sources.size(), exact, renders, refused_too, refusals);
  for (const auto& m : misses) ADD_FAILURE() << m;
  EXPECT_GE(sources.size(), 35u);
}

}  // namespace
}  // namespace sightline::api
