// Janus-Pro's prompt and guidance row (text/janus_prompt.h), as upstream's
// generation_inference.py builds them.
#include "text/janus_prompt.h"

#include <gtest/gtest.h>

namespace mulo::text {
namespace {

TEST(JanusPromptTest, TheDeepseekTemplateWithTheImageStartTag) {
  EXPECT_EQ(JanusT2iPrompt("a red fox in the snow"),
            "<|User|>: a red fox in the snow\n\n<|Assistant|>:<begin_of_image>");
  // The caption is stripped as str.strip() does, Unicode spaces included; inner ones stay.
  EXPECT_EQ(JanusT2iPrompt(" \t\u3000a  fox\u00a0\n"),
            "<|User|>: a  fox\n\n<|Assistant|>:<begin_of_image>");
  // An empty turn is just its role and a colon.
  EXPECT_EQ(JanusT2iPrompt("  "), "<|User|>:<|Assistant|>:<begin_of_image>");
}

TEST(JanusPromptTest, StripsWhatPythonsIsspaceAccepts) {
  EXPECT_EQ(StripPythonWhitespace("\x1c\v\f x \u2028\u0085"), "x");
  EXPECT_EQ(StripPythonWhitespace("\u200bx"), "\u200bx");  // zero-width space: not isspace
  EXPECT_EQ(StripPythonWhitespace(""), "");
}

}  // namespace
}  // namespace mulo::text
