#include "text/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::text {

absl::StatusOr<std::string> RenderQwen2Chat(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt) {
  if (messages.empty()) return absl::InvalidArgumentError("messages: at least one is needed");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].role: '", role, "' is not supported (system, user, assistant)"));
    }
  }
  auto turn = [](const ChatMessage& m) {
    return absl::StrCat("<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  };
  const bool own_system = messages[0].role == "system";
  std::string out = own_system ? turn(messages[0])
                               : turn({"system",
                                       "You are Qwen, created by Alibaba Cloud. You are a "
                                       "helpful assistant."});
  for (size_t i = own_system ? 1 : 0; i < messages.size(); ++i) out += turn(messages[i]);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace mulo::text
