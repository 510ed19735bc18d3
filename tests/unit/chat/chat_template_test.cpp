// Units of ChatTemplate: the Python-compatible pieces of the Jinja environment, error paths, and
// continue_final_message. Full model templates are checked against transformers in
// tests/oracle/chat/.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace radixserve::chat {
namespace {

std::string RenderOrDie(const std::string& source, const Json& kwargs = Json::object()) {
  auto tmpl = ChatTemplate::Compile(source, {"<s>", "</s>", "", "", {}});
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().message();
  ChatRenderInput input;
  input.template_kwargs = kwargs;
  auto out = tmpl->Render(input);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? out.value() : std::string();
}

TEST(ChatTemplateTest, SyntaxErrorIsInvalidArgument) {
  auto tmpl = ChatTemplate::Compile("{% for x in %}");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_EQ(tmpl.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tmpl.status().message().find("does not compile"), std::string::npos);
}

TEST(ChatTemplateTest, RaiseExceptionBecomesStatusWithItsMessage) {
  auto tmpl = ChatTemplate::Compile("{{ raise_exception('roles must alternate') }}");
  ASSERT_TRUE(tmpl.ok());
  auto out = tmpl->Render({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("roles must alternate"), std::string::npos);
}

TEST(ChatTemplateTest, UndefinedAttributeOfUndefinedIsAnErrorNotACrash) {
  auto tmpl = ChatTemplate::Compile("{{ nothing.at.all }}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Render({}).ok());
}

TEST(ChatTemplateTest, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(RenderOrDie("  {% if true %}\nA\n  {% endif %}\nB"), "A\nB");
}

TEST(ChatTemplateTest, SpecialTokensAndKwargsAreVisible) {
  EXPECT_EQ(
      RenderOrDie("{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ x }}", {{"x", 7}}),
      "<s>|</s>|False|7");
}

TEST(ChatTemplateTest, TojsonMatchesPythonJsonDumps) {
  Json kwargs = {{"v", Json::parse(R"({"b": [1, 2.5, null, true], "a": "é\"<>\n", "c": {}})")}};
  EXPECT_EQ(RenderOrDie("{{ v | tojson }}", kwargs),
            R"({"b": [1, 2.5, null, true], "a": "é\"<>\n", "c": {}})");
  EXPECT_EQ(RenderOrDie("{{ v.b | tojson(indent=2) }}", kwargs),
            "[\n  1,\n  2.5,\n  null,\n  true\n]");
  EXPECT_EQ(RenderOrDie("{{ v | tojson(sort_keys=true, separators=(',', ':')) }}", kwargs),
            R"({"a":"é\"<>\n","b":[1,2.5,null,true],"c":{}})");
  EXPECT_EQ(RenderOrDie("{{ v.a | tojson(ensure_ascii=true) }}", kwargs), R"("\u00e9\"<>\n")");
}

TEST(ChatTemplateTest, PythonReprAndFloats) {
  Json kwargs = {{"v", Json::parse(R"({"k": ["it's", 1e-05, 1e16, 0.1, 3.0]})")}};
  EXPECT_EQ(RenderOrDie("{{ v }}|{{ none }}|{{ true }}", kwargs),
            R"({'k': ["it's", 1e-05, 1e+16, 0.1, 3.0]}|None|True)");
}

TEST(ChatTemplateTest, PythonStringAndDictMethods) {
  Json kwargs = {{"s", "  Hello World  "}, {"d", {{"a", 1}}}};
  EXPECT_EQ(RenderOrDie("{{ s.strip().lower() }}|{{ s.split() | join(',') }}|"
                        "{{ s.strip().startswith('Hello') }}|{{ d.get('a') }}|{{ d.get('z', 5) }}|"
                        "{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}",
                        kwargs),
            "hello world|Hello,World|True|1|5|a=1");
}

TEST(ChatTemplateTest, LoopControls) {
  EXPECT_EQ(RenderOrDie("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
                        "{% endfor %}"),
            "012");
}

TEST(ChatTemplateTest, ContinueFinalMessageCutsAfterTheMessage) {
  auto tmpl = ChatTemplate::Compile(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  ChatRenderInput input;
  input.messages = Json::parse(
      R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure, "}])");
  input.continue_final_message = true;
  auto out = tmpl->Render(input);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(), "<user>hi</user><assistant>Sure, ");
  input.add_generation_prompt = true;
  EXPECT_FALSE(tmpl->Render(input).ok());
}

TEST(ChatTemplateTest, RejectsNonObjectMessages) {
  auto tmpl = ChatTemplate::Compile("x");
  ASSERT_TRUE(tmpl.ok());
  ChatRenderInput input;
  input.messages = Json::parse(R"(["hello"])");
  EXPECT_EQ(tmpl->Render(input).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, DetectsContentFormat) {
  EXPECT_EQ(DetectContentFormat("{{ message['content'] }}"), ContentFormat::kString);
  EXPECT_EQ(DetectContentFormat("{% for part in message['content'] %}{% endfor %}"),
            ContentFormat::kOpenAI);
  EXPECT_EQ(DetectContentFormat("{%- for c in message.content | selectattr('x') %}"),
            ContentFormat::kOpenAI);
  EXPECT_EQ(DetectContentFormat("{{ '<image>' }}"), ContentFormat::kOpenAI);
}

TEST(ChatTemplateTest, PrepareMessageFlattensTextPartsForStringTemplates) {
  Json message = Json::parse(
      R"({"role": "user", "name": null, "content": [{"type": "text", "text": "a"},
          {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]})");
  EXPECT_EQ(PrepareMessage(message, ContentFormat::kString),
            Json::parse(R"({"role": "user", "content": "a b"})"));
  EXPECT_EQ(PrepareMessage(message, ContentFormat::kOpenAI).dump(),
            Json::parse(R"({"role": "user", "content": [{"type": "text", "text": "a"},
                {"type": "image"}, {"type": "text", "text": "b"}]})")
                .dump());
}

TEST(ChatTemplateTest, RunawayRecursionIsAnErrorNotACrash) {
  auto tmpl = ChatTemplate::Compile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(tmpl.ok());
  auto out = tmpl->Render({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, InvalidUtf8InMessagesIsReplacedNotThrown) {
  auto tmpl = ChatTemplate::Compile("{{ messages[0].content }}");
  ASSERT_TRUE(tmpl.ok());
  ChatRenderInput input;
  input.messages = Json::array({Json{{"role", "user"}, {"content", std::string("a\xff")}}});
  auto out = tmpl->Render(input);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(), "a\xef\xbf\xbd");
}

TEST(ChatTemplateTest, OneTemplateRendersFromManyThreads) {
  auto tmpl =
      ChatTemplate::Compile("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        ChatRenderInput input;
        std::string text = std::to_string(t * 100 + i);
        input.messages = Json::array({Json{{"role", "user"}, {"content", text}}});
        auto out = tmpl->Render(input);
        if (!out.ok() || out.value() != "user:" + text + ";") ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace radixserve::chat
