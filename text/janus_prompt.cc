#include "text/janus_prompt.h"

namespace mulo::text {
namespace {

// The UTF-8 forms of the characters Python's str.isspace() accepts: \t \n \v \f \r,
// U+001C-U+001F, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000.
constexpr std::string_view kSpaces[] = {
    "\t",           "\n",           "\v",           "\f",           "\r",
    "\x1c",         "\x1d",         "\x1e",         "\x1f",         " ",
    "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
    "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86",
    "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8",
    "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};

size_t SpaceAtFront(std::string_view text) {
  for (std::string_view space : kSpaces) {
    if (text.substr(0, space.size()) == space) return space.size();
  }
  return 0;
}

size_t SpaceAtBack(std::string_view text) {
  for (std::string_view space : kSpaces) {
    if (text.size() >= space.size() && text.substr(text.size() - space.size()) == space) {
      return space.size();
    }
  }
  return 0;
}

}  // namespace

std::string_view StripPythonWhitespace(std::string_view text) {
  while (size_t n = SpaceAtFront(text)) text.remove_prefix(n);
  while (size_t n = SpaceAtBack(text)) text.remove_suffix(n);
  return text;
}

std::string JanusT2iPrompt(std::string_view caption) {
  const std::string_view message = StripPythonWhitespace(caption);
  // The DeepSeek separator style: a turn with text is "role: text" and its separator ("\n\n"
  // after the user's), an empty one just "role:".
  std::string prompt = "<|User|>:";
  if (!message.empty()) {
    prompt += " ";
    prompt += message;
    prompt += "\n\n";
  }
  prompt += "<|Assistant|>:";
  return std::string(StripPythonWhitespace(prompt)) + "<begin_of_image>";
}

}  // namespace mulo::text
