// Chat templates of the language models whose prompts we build, written as code (not a Jinja
// engine): each function renders what the model's tokenizer_config.json "chat_template" renders
// for plain text messages. tests/peers/bpe_tokenizer_test.sh checks them against the files'
// own templates rendered by Hugging Face's Jinja (@huggingface/jinja).
#ifndef MULO_TEXT_CHAT_TEMPLATE_H_
#define MULO_TEXT_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mulo::text {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Qwen2 / Qwen2.5 Instruct (Tar's MLLM): ChatML, each message as
// "<|im_start|>{role}\n{content}<|im_end|>\n", after Qwen's default system message when the
// first is not a system message; "<|im_start|>assistant\n" last when `add_generation_prompt`.
// INVALID_ARGUMENT naming "messages" when empty and "messages[i].role" for a role the template
// gives no plain form (tool calls and tool results are not built here).
absl::StatusOr<std::string> RenderQwen2Chat(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt);

}  // namespace mulo::text

#endif  // MULO_TEXT_CHAT_TEMPLATE_H_
