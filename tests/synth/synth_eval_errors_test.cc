// SynthEval on inputs it must refuse or fail without crashing, on image sizes other than 64
// and 32, and on hand-made scenes with one specific fault each.
#include <gtest/gtest.h>
#include <opencv2/core.hpp>

#include <string>

#include "absl/status/status.h"
#include "synth/render.h"
#include "synth/synth_eval.h"
#include "tests/synth/test_util.h"

namespace mulo::synth {
namespace {

constexpr char kCaption[] = "a small red circle in the top left on a blue background";

Scene OneCircle() {
  Scene scene;
  scene.background = {BackgroundKind::kSolid, {"blue"}};
  scene.objects = {{"red", Shape::kCircle, Size::kSmall, 0, 0.004, -0.007}};
  scene.size_mentioned = {true};
  return scene;
}

bool Mentions(const Verdict& v, const std::string& text) {
  for (const auto& r : v.reasons) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(SynthEvalErrorsTest, BadCaptionsAreInvalidArgument) {
  const cv::Mat image = testing::RenderOrDie(OneCircle(), 64);
  for (const char* caption : {"", "a red dog in the center on a blue background",
                              "a red circle on a blue background", "a blue background"}) {
    auto verdict = SynthEval().Evaluate(caption, image);
    EXPECT_EQ(verdict.status().code(), absl::StatusCode::kInvalidArgument) << caption;
  }
}

TEST(SynthEvalErrorsTest, UnusableImagesFailWithAReason) {
  const cv::Mat good = testing::RenderOrDie(OneCircle(), 64);
  cv::Mat gray(64, 64, CV_8UC1, cv::Scalar(128));
  cv::Mat rgba(64, 64, CV_8UC4, cv::Scalar(1, 2, 3, 4));
  cv::Mat floats;
  good.convertTo(floats, CV_32FC3);
  const std::vector<std::pair<cv::Mat, std::string>> cases = {
      {cv::Mat(), "empty"}, {good(cv::Rect(0, 0, 64, 48)).clone(), "square"},
      {gray, "CV_8UC3"},    {rgba, "CV_8UC3"},
      {floats, "CV_8UC3"},  {testing::RenderOrDie(OneCircle(), 8), "smaller than"},
  };
  for (const auto& [image, reason] : cases) {
    SCOPED_TRACE(reason);
    auto verdict = SynthEval().Evaluate(kCaption, image);
    ASSERT_TRUE(verdict.ok()) << verdict.status();
    EXPECT_FALSE(verdict->pass);
    EXPECT_FALSE(verdict->color || verdict->shape || verdict->size || verdict->position ||
                 verdict->background);
    EXPECT_TRUE(Mentions(*verdict, reason)) << verdict->ToString();
  }
}

TEST(SynthEvalErrorsTest, PassesAtOtherSizes) {
  const auto entries = testing::LoadHeldout();
  ASSERT_GE(entries.size(), 64u);
  const SynthEval eval;
  for (int size : {48, 50, 96, 128}) {
    int passed = 0;
    for (size_t i = 0; i < 64; ++i) {
      auto verdict = eval.Evaluate(entries[i].prompt, testing::RenderOrDie(entries[i].scene, size));
      ASSERT_TRUE(verdict.ok());
      passed += verdict->pass;
    }
    EXPECT_GE(passed, 63) << size << " px";
  }
}

TEST(SynthEvalErrorsTest, MissingObject) {
  Scene scene = OneCircle();
  scene.objects.clear();
  auto verdict = SynthEval().Evaluate(kCaption, testing::RenderOrDie(scene, 64));
  ASSERT_TRUE(verdict.ok());
  EXPECT_FALSE(verdict->pass);
  EXPECT_TRUE(verdict->background);
  EXPECT_FALSE(verdict->position);
  EXPECT_FALSE(verdict->color);
  EXPECT_TRUE(Mentions(*verdict, "no small red circle in the top left")) << verdict->ToString();
}

TEST(SynthEvalErrorsTest, UnexpectedObject) {
  Scene scene = OneCircle();
  scene.objects.push_back({"yellow", Shape::kSquare, Size::kLarge, 4, 0.0, 0.0});
  auto verdict = SynthEval().Evaluate(kCaption, testing::RenderOrDie(scene, 64));
  ASSERT_TRUE(verdict.ok());
  EXPECT_FALSE(verdict->pass);
  EXPECT_TRUE(verdict->color && verdict->shape && verdict->size && verdict->background);
  EXPECT_FALSE(verdict->position);
  EXPECT_TRUE(Mentions(*verdict, "unexpected object in center")) << verdict->ToString();
}

TEST(SynthEvalErrorsTest, EachAttributeOnItsOwn) {
  const cv::Mat image = testing::RenderOrDie(OneCircle(), 64);
  const SynthEval eval;
  struct Case {
    const char* caption;
    bool Verdict::*failing;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"a small green circle in the top left on a blue background", &Verdict::color, "looks red"},
      {"a small red square in the top left on a blue background", &Verdict::shape,
       "looks like a circle"},
      {"a large red circle in the top left on a blue background", &Verdict::size, "looks small"},
      {"a small red circle in the bottom right on a blue background", &Verdict::position,
       "unexpected object in top left"},
      {"a small red circle in the top left on a white background", &Verdict::background,
       "looks blue"},
      {"a small red circle in the top left on blue and white stripes", &Verdict::background,
       "background"},
      {"a small red circle in the top left on a blue to white gradient", &Verdict::background,
       "the bottom looks blue"},
  };
  auto ok = eval.Evaluate(kCaption, image);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->pass) << ok->ToString();
  auto unsized = eval.Evaluate("red circle at top left, over a blue background", image);
  ASSERT_TRUE(unsized.ok());
  EXPECT_TRUE(unsized->pass) << unsized->ToString();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.caption);
    auto verdict = eval.Evaluate(c.caption, image);
    ASSERT_TRUE(verdict.ok()) << verdict.status();
    EXPECT_FALSE(verdict->pass);
    EXPECT_FALSE((*verdict).*(c.failing)) << verdict->ToString();
    EXPECT_TRUE(Mentions(*verdict, c.reason)) << verdict->ToString();
  }
}

TEST(SynthEvalErrorsTest, WrongBackgroundKindWithTheRightColours) {
  Scene scene = OneCircle();
  scene.background = {BackgroundKind::kStripes, {"white", "black"}};
  const cv::Mat stripes = testing::RenderOrDie(scene, 64);
  const SynthEval eval;
  auto right =
      eval.Evaluate("a small red circle in the top left on white and black stripes", stripes);
  ASSERT_TRUE(right.ok());
  EXPECT_TRUE(right->pass) << right->ToString();
  auto swapped =
      eval.Evaluate("a small red circle in the top left on black and white stripes", stripes);
  ASSERT_TRUE(swapped.ok());
  EXPECT_FALSE(swapped->background) << swapped->ToString();
  EXPECT_TRUE(swapped->color && swapped->shape && swapped->position) << swapped->ToString();
  auto gradient =
      eval.Evaluate("a small red circle in the top left on a white to black gradient", stripes);
  ASSERT_TRUE(gradient.ok());
  EXPECT_FALSE(gradient->background) << gradient->ToString();
  EXPECT_TRUE(Mentions(*gradient, "match")) << gradient->ToString();
}

}  // namespace
}  // namespace mulo::synth
