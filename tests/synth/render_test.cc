// The C++ renderer against renders written by the Python definition (tools/synth/domain.py,
// via tools/synth/render_fixtures.py): every pixel must be identical at 64 and 32 pixels.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "synth/palette.h"
#include "synth/render.h"
#include "synth/scene.h"
#include "tests/synth/test_util.h"

namespace mulo::synth {
namespace {

using testing::kRendersPath;
using testing::kScenesPath;

std::vector<Scene> LoadFixtureScenes() {
  std::vector<Scene> scenes;
  const auto json = nlohmann::json::parse(testing::ReadFile(kScenesPath), nullptr, false);
  EXPECT_TRUE(json.is_array());
  if (!json.is_array()) return scenes;
  for (const auto& entry : json) {
    auto scene = SceneFromJson(entry.at("scene"));
    EXPECT_TRUE(scene.ok()) << scene.status();
    if (scene.ok()) scenes.push_back(*scene);
  }
  return scenes;
}

TEST(RenderTest, MatchesPythonPixelForPixel) {
  const std::vector<Scene> scenes = LoadFixtureScenes();
  ASSERT_EQ(scenes.size(), 12u);
  const auto tensors = testing::ReadU8Safetensors(kRendersPath);
  for (int size : {64, 32}) {
    SCOPED_TRACE(size);
    const auto it = tensors.find("s" + std::to_string(size));
    ASSERT_NE(it, tensors.end());
    const auto& t = it->second;
    ASSERT_EQ(t.shape, (std::vector<int64_t>{12, size, size, 3}));
    for (size_t i = 0; i < scenes.size(); ++i) {
      const cv::Mat image = testing::RenderOrDie(scenes[i], size);
      ASSERT_EQ(image.type(), CV_8UC3);
      ASSERT_EQ(image.rows, size);
      ASSERT_EQ(image.cols, size);
      ASSERT_TRUE(image.isContinuous());
      const uint8_t* expected = t.data.data() + i * size * size * 3;
      int differing = 0;
      for (int k = 0; k < size * size * 3; ++k) differing += image.data[k] != expected[k];
      EXPECT_EQ(differing, 0) << "scene " << i << " differs in " << differing << " channel values";
    }
  }
}

TEST(RenderTest, FixtureCoversEveryKindShapeAndSize) {
  std::set<BackgroundKind> kinds;
  std::set<Shape> shapes;
  std::set<Size> sizes;
  for (const auto& scene : LoadFixtureScenes()) {
    kinds.insert(scene.background.kind);
    for (const auto& obj : scene.objects) {
      shapes.insert(obj.shape);
      sizes.insert(obj.size);
    }
  }
  EXPECT_EQ(kinds.size(), 3u);
  EXPECT_EQ(shapes.size(), 4u);
  EXPECT_EQ(sizes.size(), 2u);
}

TEST(RenderTest, PaletteMatchesDomain) {
  // domain.BACKGROUND_COLORS as Python prints it.
  EXPECT_EQ(*BackgroundColor("red"), (Rgb{234, 120, 120}));
  EXPECT_EQ(*BackgroundColor("orange"), (Rgb{249, 180, 114}));
  EXPECT_EQ(*BackgroundColor("yellow"), (Rgb{249, 237, 126}));
  EXPECT_EQ(*BackgroundColor("green"), (Rgb{120, 198, 132}));
  EXPECT_EQ(*BackgroundColor("cyan"), (Rgb{120, 222, 234}));
  EXPECT_EQ(*BackgroundColor("blue"), (Rgb{120, 138, 234}));
  EXPECT_EQ(*BackgroundColor("purple"), (Rgb{186, 132, 222}));
  EXPECT_EQ(*BackgroundColor("pink"), (Rgb{243, 138, 216}));
  EXPECT_EQ(*BackgroundColor("black"), (Rgb{30, 30, 30}));
  EXPECT_EQ(*BackgroundColor("white"), (Rgb{245, 245, 245}));
  EXPECT_EQ(*BackgroundColor("gray"), (Rgb{128, 128, 128}));
  EXPECT_FALSE(ObjectColor("gray").has_value());
  EXPECT_EQ(*ObjectColor("cyan"), (Rgb{30, 200, 220}));
}

TEST(RenderTest, LaterObjectsPaintOverEarlierOnes) {
  Scene scene;
  scene.background = {BackgroundKind::kSolid, {"white"}};
  scene.objects = {{"red", Shape::kSquare, Size::kLarge, 4, 0.0, 0.0},
                   {"blue", Shape::kCircle, Size::kSmall, 4, 0.0, 0.0}};
  const cv::Mat image = testing::RenderOrDie(scene, 64);
  EXPECT_EQ(image.at<cv::Vec3b>(32, 32), cv::Vec3b(30, 60, 220));  // blue, RGB order
  EXPECT_EQ(image.at<cv::Vec3b>(32, 39), cv::Vec3b(220, 30, 30));  // red square's edge
  EXPECT_EQ(image.at<cv::Vec3b>(0, 0), cv::Vec3b(245, 245, 245));  // background
}

TEST(RenderTest, GradientAndStripes) {
  Scene gradient;
  gradient.background = {BackgroundKind::kGradient, {"black", "white"}};
  const cv::Mat g = testing::RenderOrDie(gradient, 32);
  // int(30 + 215 * v + 0.5) at v = 0.5 / 32 and 31.5 / 32.
  EXPECT_EQ(g.at<cv::Vec3b>(0, 5), cv::Vec3b(33, 33, 33));
  EXPECT_EQ(g.at<cv::Vec3b>(31, 5), cv::Vec3b(242, 242, 242));
  Scene stripes;
  stripes.background = {BackgroundKind::kStripes, {"red", "blue"}};
  const cv::Mat s = testing::RenderOrDie(stripes, 32);
  EXPECT_EQ(s.at<cv::Vec3b>(7, 0), cv::Vec3b(234, 120, 120));  // stripe 0: first colour
  EXPECT_EQ(s.at<cv::Vec3b>(7, 4), cv::Vec3b(120, 138, 234));  // stripe 1: second colour
}

TEST(RenderTest, RejectsInvalidScenes) {
  Scene scene;
  scene.background = {BackgroundKind::kGradient, {"red"}};
  EXPECT_EQ(Render(scene, 32).status().code(), absl::StatusCode::kInvalidArgument);
  scene.background = {BackgroundKind::kSolid, {"red"}};
  EXPECT_EQ(Render(scene, 0).status().code(), absl::StatusCode::kInvalidArgument);
  scene.objects = {{"gray", Shape::kCircle, Size::kSmall, 0, 0.0, 0.0}};
  EXPECT_EQ(Render(scene, 32).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RenderTest, InsideMatchesDomainGeometry) {
  EXPECT_TRUE(Inside(Shape::kCircle, 0.09, 0.0, 0.09));
  EXPECT_FALSE(Inside(Shape::kCircle, 0.07, 0.07, 0.09));
  EXPECT_TRUE(Inside(Shape::kSquare, 0.07, 0.07, 0.09));  // 0.85 h = 0.0765
  EXPECT_FALSE(Inside(Shape::kSquare, 0.08, 0.0, 0.09));
  EXPECT_TRUE(Inside(Shape::kDiamond, 0.045, 0.045, 0.09));
  EXPECT_FALSE(Inside(Shape::kDiamond, 0.05, 0.05, 0.09));
  EXPECT_TRUE(Inside(Shape::kTriangle, 0.0, -0.09, 0.09));    // apex
  EXPECT_TRUE(Inside(Shape::kTriangle, 0.09, 0.09, 0.09));    // base corner
  EXPECT_FALSE(Inside(Shape::kTriangle, 0.05, -0.05, 0.09));  // beside the apex
  EXPECT_FALSE(Inside(Shape::kTriangle, 0.0, 0.1, 0.09));     // below the base
}

}  // namespace
}  // namespace mulo::synth
