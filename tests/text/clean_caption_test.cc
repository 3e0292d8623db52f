// LlamaGen t2i's caption cleaning (text/clean_caption.h): each case exercises one of
// clean_caption's rules, with the output that rule gives in upstream's order.
#include "text/clean_caption.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace mulo::text {
namespace {

class CleanCaptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cleaner = CaptionCleaner::Create();
    ASSERT_TRUE(cleaner.ok()) << cleaner.status();
    cleaner_ = *std::move(cleaner);
  }
  std::string Clean(const std::string& caption) { return cleaner_->Clean(caption); }
  std::unique_ptr<CaptionCleaner> cleaner_;
};

TEST_F(CleanCaptionTest, LowerCasesAndStrips) {
  EXPECT_EQ(Clean("  A Red Fox in the Snow  "), "a red fox in the snow");
}

TEST_F(CleanCaptionTest, UnquotesPlusAndPercent) {
  EXPECT_EQ(Clean("Hello+World%21"), "hello world!");
}

TEST_F(CleanCaptionTest, DropsMarkupAndDecodesReferences) {
  // The tags go, &amp; becomes '&', which the bad-punctuation rule turns into a space.
  EXPECT_EQ(Clean("<b>Bold</b> cat &amp; dog"), "bold cat dog");
  EXPECT_EQ(Clean("caf&#233; &lt;3"), "caf\u00e9 <3");
  EXPECT_EQ(Clean("a <3 b"), "a <3 b");  // '<' before a digit is text
}

TEST_F(CleanCaptionTest, DropsHandlesAndSplitsLongHyphenations) {
  EXPECT_EQ(Clean("@user check this-is-my-cute-cat"), "check this is my cute cat");
  EXPECT_EQ(Clean("a well-known red-brown cat"), "a well-known red-brown cat");
}

TEST_F(CleanCaptionTest, NormalisesDashesAndQuotes) {
  EXPECT_EQ(Clean("a cat\u2014on a \u201cmat\u201d"), "a cat-on a \"mat\"");
  EXPECT_EQ(Clean("\u2018a quoted caption\u2019"), "a quoted caption");
}

TEST_F(CleanCaptionTest, DropsUrlsAddressesAndCodes) {
  EXPECT_EQ(Clean("a cat 192.168.0.1"), "a cat");
  EXPECT_EQ(Clean("item jc6640 size 10x20 page 3"), "item size");
  EXPECT_EQ(Clean("free shipping worldwide on cat toys"), "worldwide on cat toys");
  EXPECT_EQ(Clean("see www.example.com for cats"), "see for cats");
}

TEST_F(CleanCaptionTest, PunctuationSpacing) {
  EXPECT_EQ(Clean("cat...dog"), "cat dog");
  EXPECT_EQ(Clean("red,blue"), "red, blue");
  EXPECT_EQ(Clean("line one\\nline two"), "line one line two");
  EXPECT_EQ(Clean("a *** b | c"), "a b c");
}

TEST_F(CleanCaptionTest, RemovesCjkAndFixesWidthAndLigatures) {
  EXPECT_EQ(Clean("a cat \u732b"), "a cat");
  EXPECT_EQ(Clean("\ufb01ne \uff21\uff22\uff23"), "fine abc");
}

TEST_F(CleanCaptionTest, TwoPassesAsUpstream) {
  // The first pass removes one leading '-', the second the next.
  EXPECT_EQ(cleaner_->CleanOnce("- - cat"), "- cat");
  EXPECT_EQ(Clean("- - cat"), "cat");
}

TEST_F(CleanCaptionTest, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(Clean(std::string("cat \xff dog")), "cat \ufffd dog");
}

}  // namespace
}  // namespace mulo::text
