// CompletionTemplate: SGLang's FIM layouts and --completion-template resolution.
#include "chat/completion_template.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace radixserve::chat {
namespace {

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(CompletionTemplateTest, BuiltinsUseSGLangTokensAndPositions) {
  auto deepseek = CompletionTemplate::Load("deepseek_coder");
  ASSERT_TRUE(deepseek.ok());
  EXPECT_EQ(deepseek->Apply("def f():", "return 1"),
            "<｜fim▁begin｜>def f():<｜fim▁hole｜>return 1<｜fim▁end｜>");
  auto star = CompletionTemplate::Load("star_coder");
  ASSERT_TRUE(star.ok());
  EXPECT_EQ(star->Apply("a", "b"), "<fim_prefix>a<fim_suffix>b<fim_middle>");
  auto qwen = CompletionTemplate::Load("qwen_coder");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->Apply("a", "b"), "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>");
}

TEST(CompletionTemplateTest, EmptySuffixLeavesPromptUnchanged) {
  auto qwen = CompletionTemplate::Load("qwen_coder");
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->Apply("print(", ""), "print(");
}

TEST(CompletionTemplateTest, LoadsJsonFile) {
  auto path = WriteTemp("radix_fim_ok.json",
                        R"({"name": "mine", "fim_begin_token": "<B>", "fim_middle_token": "<M>",
                            "fim_end_token": "<E>", "fim_position": "MIDDLE"})");
  auto fim = CompletionTemplate::Load(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(fim.ok()) << fim.status().message();
  EXPECT_EQ(fim->name, "mine");
  EXPECT_EQ(fim->Apply("p", "s"), "<B>p<M>s<E>");
}

TEST(CompletionTemplateTest, BadFilesAreErrors) {
  auto missing = CompletionTemplate::Load("/nonexistent/fim.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("qwen_coder"), std::string::npos);

  auto path = WriteTemp("radix_fim_bad.json",
                        R"({"name": "x", "fim_begin_token": "a", "fim_middle_token": "b",
                            "fim_end_token": "c", "fim_position": "START"})");
  auto bad_position = CompletionTemplate::Load(path.string());
  EXPECT_EQ(bad_position.status().code(), StatusCode::kInvalidArgument);
  std::ofstream(path) << R"({"name": "x", "fim_position": 3})";
  EXPECT_EQ(CompletionTemplate::Load(path.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(path) << "not json";
  EXPECT_EQ(CompletionTemplate::Load(path.string()).status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace radixserve::chat
