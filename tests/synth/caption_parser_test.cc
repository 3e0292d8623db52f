// The caption parser on every held-out prompt and mismatched caption, on each paraphrase
// template of tools/synth/domain.py, and on captions outside the grammar.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "synth/caption_parser.h"
#include "tests/synth/test_util.h"

namespace mulo::synth {
namespace {

// What a caption of `scene` claims (sizes only where the caption mentions them).
CaptionClaims ClaimsOf(const Scene& scene) {
  CaptionClaims claims;
  claims.background = scene.background;
  for (size_t i = 0; i < scene.objects.size(); ++i) {
    const auto& o = scene.objects[i];
    ObjectClaim c{o.color, o.shape, std::nullopt, o.cell};
    if (scene.size_mentioned[i]) c.size = o.size;
    claims.objects.push_back(c);
  }
  return claims;
}

bool SameBackground(const Background& a, const Background& b) {
  return a.kind == b.kind && a.colors == b.colors;
}

std::string Show(const CaptionClaims& c) {
  std::string s = DescribeBackground(c.background);
  for (const auto& o : c.objects) s += "; " + DescribeObject(o);
  return s;
}

TEST(CaptionParserTest, TokenizesLikeDomain) {
  EXPECT_EQ(Tokenize("top left: small red circle, blue background"),
            (std::vector<std::string>{"top", "left", ":", "small", "red", "circle", ",", "blue",
                                      "background"}));
  EXPECT_EQ(Tokenize("  a\tred  circle "), (std::vector<std::string>{"a", "red", "circle"}));
  EXPECT_TRUE(Tokenize("").empty());
}

TEST(CaptionParserTest, ParsesEveryTemplate) {
  struct Case {
    const char* caption;
    BackgroundKind kind;
    std::vector<std::string> colors;
    std::vector<ObjectClaim> objects;
  };
  const std::vector<Case> cases = {
      // _t_sentence
      {"a small red circle in the top left and a large green square in the center on a blue "
       "background",
       BackgroundKind::kSolid,
       {"blue"},
       {{"red", Shape::kCircle, Size::kSmall, 0}, {"green", Shape::kSquare, Size::kLarge, 4}}},
      // _t_listing, a size left out
      {"top left: small red circle, center: green square, blue to white gradient",
       BackgroundKind::kGradient,
       {"blue", "white"},
       {{"red", Shape::kCircle, Size::kSmall, 0}, {"green", Shape::kSquare, std::nullopt, 4}}},
      // _t_background_first, "an" before a vowel
      {"a gray to black gradient with an orange triangle in the bottom right",
       BackgroundKind::kGradient,
       {"gray", "black"},
       {{"orange", Shape::kTriangle, std::nullopt, 8}}},
      {"red and blue stripes with a small yellow diamond in the middle left and a large purple "
       "circle in the middle right",
       BackgroundKind::kStripes,
       {"red", "blue"},
       {{"yellow", Shape::kDiamond, Size::kSmall, 3}, {"purple", Shape::kCircle, Size::kLarge, 5}}},
      // _t_terse
      {"small red circle at top left, large green square at bottom middle, over blue and white "
       "stripes",
       BackgroundKind::kStripes,
       {"blue", "white"},
       {{"red", Shape::kCircle, Size::kSmall, 0}, {"green", Shape::kSquare, Size::kLarge, 7}}},
      {"pink diamond at top right, over an orange background",
       BackgroundKind::kSolid,
       {"orange"},
       {{"pink", Shape::kDiamond, std::nullopt, 2}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.caption);
    auto claims = ParseCaption(c.caption);
    ASSERT_TRUE(claims.ok()) << claims.status();
    EXPECT_EQ(claims->background.kind, c.kind);
    EXPECT_EQ(claims->background.colors, c.colors);
    EXPECT_EQ(claims->objects, c.objects);
  }
}

TEST(CaptionParserTest, EveryPositionName) {
  for (int cell = 0; cell < kCells; ++cell) {
    const std::string position(kPositions[cell]);
    for (const std::string& caption : {"a red circle in the " + position + " on a white background",
                                       position + ": red circle, white background",
                                       "red circle at " + position + ", over a white background"}) {
      SCOPED_TRACE(caption);
      auto claims = ParseCaption(caption);
      ASSERT_TRUE(claims.ok()) << claims.status();
      ASSERT_EQ(claims->objects.size(), 1u);
      EXPECT_EQ(claims->objects[0].cell, cell);
    }
  }
}

TEST(CaptionParserTest, HeldoutPromptsParseToTheirScenes) {
  const auto entries = testing::LoadHeldout();
  ASSERT_EQ(entries.size(), 512u);
  std::vector<int> per_template(4, 0);
  for (const auto& entry : entries) {
    SCOPED_TRACE(entry.prompt);
    auto claims = ParseCaption(entry.prompt);
    ASSERT_TRUE(claims.ok()) << claims.status();
    const CaptionClaims want = ClaimsOf(entry.scene);
    EXPECT_TRUE(SameBackground(claims->background, want.background)) << Show(*claims);
    EXPECT_EQ(claims->objects, want.objects) << Show(*claims);
    ++per_template.at(entry.scene.template_index);
  }
  for (int t = 0; t < 4; ++t) EXPECT_GT(per_template[t], 50) << "template " << t;
}

TEST(CaptionParserTest, MismatchedCaptionsParseAndDifferInTheirAttribute) {
  const auto entries = testing::LoadHeldout();
  ASSERT_EQ(entries.size(), 512u);
  for (const auto& entry : entries) {
    const CaptionClaims truth = ClaimsOf(entry.scene);
    ASSERT_EQ(entry.mismatched.size(), 5u);
    for (const auto& [attribute, caption] : entry.mismatched) {
      SCOPED_TRACE(attribute + ": " + caption);
      auto claims = ParseCaption(caption);
      ASSERT_TRUE(claims.ok()) << claims.status();
      const bool same_bg = SameBackground(claims->background, truth.background);
      EXPECT_EQ(same_bg, attribute != "background");
      ASSERT_EQ(claims->objects.size(), truth.objects.size());
      int color = 0, shape = 0, size = 0, cell = 0;
      if (attribute == "position") {
        // The moved object changes the caption's order; compare by identity instead.
        for (const auto& c : claims->objects) {
          cell += std::none_of(truth.objects.begin(), truth.objects.end(),
                               [&](const ObjectClaim& t) { return t.cell == c.cell; });
        }
        EXPECT_EQ(cell, 1);
        continue;
      }
      for (size_t i = 0; i < truth.objects.size(); ++i) {
        const auto& c = claims->objects[i];
        const auto& t = truth.objects[i];
        color += c.color != t.color;
        shape += c.shape != t.shape;
        // A size mismatch always names the (wrong) size.
        size += c.size.has_value() && c.size != std::optional<Size>(entry.scene.objects[i].size);
        cell += c.cell != t.cell;
      }
      EXPECT_EQ(color, attribute == "color" ? 1 : 0);
      EXPECT_EQ(shape, attribute == "shape" ? 1 : 0);
      EXPECT_EQ(size, attribute == "size" ? 1 : 0);
      EXPECT_EQ(cell, 0);
    }
  }
}

TEST(CaptionParserTest, IgnoresCaseAndSpacing) {
  auto claims = ParseCaption("  A Small RED circle in the  Top Left on a BLUE background ");
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(claims->objects[0], (ObjectClaim{"red", Shape::kCircle, Size::kSmall, 0}));
  // ":" and "," need no surrounding spaces, as in domain.tokenize.
  claims = ParseCaption("top left:red circle,blue background");
  ASSERT_TRUE(claims.ok()) << claims.status();
}

TEST(CaptionParserTest, RejectsCaptionsOutsideTheGrammar) {
  struct Case {
    const char* caption;
    const char* message;  // a substring of the error
  };
  const std::vector<Case> cases = {
      {"", "empty"},
      {"   ", "empty"},
      {"a red dog in the center on a blue background", "unknown word \"dog\""},
      {"a red circle in the center on a blue background!", "unknown word"},
      {"a red circle in the center", "no background"},
      {"a blue background", "no object"},
      {"a red circle on a blue background", "position"},
      {"a red circle in the middle on a blue background", "position"},
      {"a gray circle in the center on a blue background", "background colour, not an object"},
      {"a red in the center on a blue background", "shape"},
      {"a red circle in the center on a blue", "\"background\""},
      {"a red circle in the center on a blue to white stripes", "\"gradient\""},
      {"a red circle in the center on blue and white gradient", "\"stripes\""},
      {"a red circle in the center on a blue background and a white background", "two backgrounds"},
      {"a red circle in the center and a blue square in the center on a white background",
       "two objects in the center"},
      {"a red circle in the center on a white background and", "ends after"},
      {"a red circle in the center the white background", "expected \"and\""},
      {"center red circle, white background", "\":\""},
      {"a small in the center on a white background", "colour"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.caption);
    auto claims = ParseCaption(c.caption);
    ASSERT_FALSE(claims.ok());
    EXPECT_EQ(claims.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(claims.status().message().find(c.message), std::string::npos)
        << claims.status().message();
  }
}

TEST(CaptionParserTest, Describes) {
  EXPECT_EQ(DescribeObject({"red", Shape::kCircle, Size::kSmall, 0}),
            "small red circle in the top left");
  EXPECT_EQ(DescribeObject({"red", Shape::kCircle, std::nullopt, 4}), "red circle in the center");
  EXPECT_EQ(DescribeBackground({BackgroundKind::kGradient, {"red", "blue"}}),
            "red to blue gradient");
  EXPECT_EQ(DescribeBackground({BackgroundKind::kStripes, {"red", "blue"}}),
            "red and blue stripes");
}

}  // namespace
}  // namespace mulo::synth
