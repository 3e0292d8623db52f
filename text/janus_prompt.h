// Janus-Pro's text-to-image prompt, as upstream's README example for Janus-Pro builds it
// (deepseek-ai/Janus 1daa72f, the roles "<|User|>" and "<|Assistant|>"; generation_inference.py
// is the same loop with Janus-1.3B's roles "User" and "Assistant";
// docs/serving-upstream-checkpoints.md, "Janus-Pro"):
//   - the "deepseek" conversation with an empty system prompt: "<|User|>: " + the caption
//     (stripped of whitespace as Python's str.strip does) + "\n\n" + "<|Assistant|>:", the
//     whole stripped, then the image start tag "<begin_of_image>"; an empty caption leaves the
//     user's turn as "<|User|>:" with nothing after it, as upstream's template does.
// The tokenizer's begin-of-sentence id goes first (text/prompt_encoder); the guidance row is
// the engine's (engine/model/janus_model.h, JanusModel::GuidancePair).
#ifndef MULO_TEXT_JANUS_PROMPT_H_
#define MULO_TEXT_JANUS_PROMPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mulo::text {

std::string JanusT2iPrompt(std::string_view caption);

// Python's str.strip() on UTF-8 text: the characters str.isspace() accepts, off both ends.
std::string_view StripPythonWhitespace(std::string_view text);

}  // namespace mulo::text

#endif  // MULO_TEXT_JANUS_PROMPT_H_
