// text/chat_template: Qwen2's ChatML with its default system message, and its refusals. The
// renderings are checked against the model file's own Jinja template by
// tests/peers/bpe_tokenizer_test.sh.
#include "text/chat_template.h"

#include <gtest/gtest.h>

namespace mulo::text {
namespace {

TEST(ChatTemplateTest, Qwen2AddsItsDefaultSystemMessageAndTheAssistantTurn) {
  auto text = RenderQwen2Chat({{"user", "a red fox"}}, /*add_generation_prompt=*/true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\na red fox<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto own = RenderQwen2Chat({{"system", "S"}, {"user", "U"}}, false);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplateTest, RefusesNamingTheField) {
  EXPECT_EQ(RenderQwen2Chat({}, true).status().message(), "messages: at least one is needed");
  auto tool = RenderQwen2Chat({{"user", "x"}, {"tool", "y"}}, true);
  EXPECT_EQ(tool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tool.status().message(),
            "messages[1].role: 'tool' is not supported (system, user, assistant)");
}

}  // namespace
}  // namespace mulo::text
