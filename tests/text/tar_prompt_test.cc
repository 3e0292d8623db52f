// text/tar_prompt: Tar's t2i prompt, exactly as upstream's t2i_inference.py builds it, and the
// reading of the codes from its MLLM's decoded answer (cut or padded with 0, as upstream).
#include "text/tar_prompt.h"

#include <gtest/gtest.h>

namespace mulo::text {
namespace {

TEST(TarPromptTest, ThePromptIsQwensChatWithTarsSystemMessageAndTheScaleToken) {
  auto prompt = TarT2iPrompt("a red fox in the snow", 0);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
            "a red fox in the snow<|im_end|>\n<|im_start|>assistant\n<im_start><S0>");
  auto small = TarT2iPrompt("x", 2);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->substr(small->size() - 14), "<im_start><S2>");
  EXPECT_EQ(*TarCodeCount(0), 729);
  EXPECT_EQ(*TarCodeCount(1), 169);
  EXPECT_EQ(*TarCodeCount(2), 81);
  EXPECT_EQ(TarT2iPrompt("x", 3).status().message(),
            "scale: 3 is not one of Tar's (0: 729, 1: 169, 2: 81 codes)");
}

TEST(TarPromptTest, CodesAreEveryImageTokenCutOrPaddedWithZero) {
  EXPECT_EQ(ParseTarCodes("<I5><I65535>text<I0012> <I7>", 4),
            std::vector<int64_t>({5, 65535, 12, 7}));
  EXPECT_EQ(ParseTarCodes("<I1><I2><I3>", 2), std::vector<int64_t>({1, 2}));
  EXPECT_EQ(ParseTarCodes("<I1>", 3), std::vector<int64_t>({1, 0, 0}));
  // Not codes: no digits, a sign, no closing bracket; a number past the codebook is kept (the
  // de-quantiser refuses it, naming the field).
  EXPECT_EQ(ParseTarCodes("<I><I-1><I4 <<I9>> <I99999>", 3),
            std::vector<int64_t>({9, 99999, 0}));
  EXPECT_EQ(ParseTarCodes("", 2), std::vector<int64_t>({0, 0}));
}

}  // namespace
}  // namespace mulo::text
