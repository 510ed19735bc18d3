// Chat template sources: tokenizer_config.json (string or named list), --chat-template (builtin
// or file), GGUF string, and special tokens.
#include "chat/chat_template_loader.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "chat/builtin_chat_templates.h"

namespace radixserve::chat {
namespace {

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ChatTemplateLoaderTest, SelectsFromStringOrNamedList) {
  EXPECT_EQ(SelectChatTemplate(Json("abc")).value(), "abc");
  Json named = Json::parse(R"([{"name": "tool_use", "template": "T"},
                               {"name": "default", "template": "D"}])");
  EXPECT_EQ(SelectChatTemplate(named).value(), "D");
  EXPECT_EQ(SelectChatTemplate(named, "tool_use").value(), "T");
  auto missing = SelectChatTemplate(named, "rag");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tool_use"), std::string::npos);
  EXPECT_FALSE(SelectChatTemplate(Json()).ok());
}

TEST(ChatTemplateLoaderTest, SpecialTokensFromStringsAndAddedTokens) {
  Json config = Json::parse(R"({"bos_token": {"__type": "AddedToken", "content": "<B>"},
                                "eos_token": "<E>", "pad_token": null,
                                "extra_special_tokens": {"boi_token": "<I>"}})");
  SpecialTokens tokens = SpecialTokensFromConfig(config);
  EXPECT_EQ(tokens.bos_token, "<B>");
  EXPECT_EQ(tokens.eos_token, "<E>");
  EXPECT_EQ(tokens.pad_token, "");
  EXPECT_EQ(tokens.unk_token, "");
  ASSERT_EQ(tokens.extra.size(), 1u);
  EXPECT_EQ(tokens.extra[0], std::make_pair(std::string("boi_token"), std::string("<I>")));
}

TEST(ChatTemplateLoaderTest, ChatTemplateArgBuiltinOrFile) {
  EXPECT_EQ(ResolveChatTemplateArg("chatml").value(), *FindBuiltinChatTemplate("chatml"));
  // SGLang strips surrounding newlines and turns literal backslash-n into newlines.
  auto path = WriteTemp("radix_chat_arg.jinja", "\n\n{{ 'a' }}\\n{{ 'b' }}\n");
  EXPECT_EQ(ResolveChatTemplateArg(path.string()).value(), "{{ 'a' }}\n{{ 'b' }}");
  std::filesystem::remove(path);

  auto missing = ResolveChatTemplateArg("/nonexistent/template.jinja");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama-3"), std::string::npos);

  auto json = WriteTemp("radix_chat_arg.json", "{}");
  EXPECT_EQ(ResolveChatTemplateArg(json.string()).status().code(), StatusCode::kUnsupported);
  std::filesystem::remove(json);
}

TEST(ChatTemplateLoaderTest, PrecedenceArgThenConfigThenGguf) {
  auto config = WriteTemp("radix_tokenizer_config.json",
                          R"({"bos_token": "<B>", "chat_template": "config:{{ bos_token }}"})");
  auto empty_config = WriteTemp("radix_tokenizer_config_empty.json", R"({"eos_token": "<E>"})");
  ChatRenderInput input;

  auto from_arg = LoadChatTemplate("chatml", config.string(), {}, "gguf");
  ASSERT_TRUE(from_arg.ok());
  EXPECT_EQ(from_arg->source(), *FindBuiltinChatTemplate("chatml"));

  auto from_config = LoadChatTemplate("", config.string(), {}, "gguf");
  ASSERT_TRUE(from_config.ok());
  EXPECT_EQ(from_config->Render(input).value(), "config:<B>");

  auto from_gguf = LoadChatTemplate("", empty_config.string(), {}, "gguf:{{ eos_token }}");
  ASSERT_TRUE(from_gguf.ok());
  EXPECT_EQ(from_gguf->Render(input).value(), "gguf:<E>");

  EXPECT_EQ(LoadChatTemplate("", empty_config.string()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadChatTemplate("", "/nonexistent/tokenizer_config.json").status().code(),
            StatusCode::kNotFound);
  std::filesystem::remove(config);
  std::filesystem::remove(empty_config);
}

TEST(ChatTemplateLoaderTest, EveryBuiltinCompiles) {
  for (std::string_view name : BuiltinChatTemplateNames()) {
    auto source = FindBuiltinChatTemplate(name);
    ASSERT_TRUE(source.has_value()) << name;
    EXPECT_TRUE(ChatTemplate::Compile(std::string(*source)).ok()) << name;
  }
}

}  // namespace
}  // namespace radixserve::chat
