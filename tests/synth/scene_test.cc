// Scene JSON parsing and the held-out prompt file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "synth/heldout.h"
#include "synth/scene.h"
#include "tests/synth/test_util.h"

namespace mulo::synth {
namespace {

constexpr char kScene[] = R"({
  "background": {"kind": "gradient", "colors": ["cyan", "pink"]},
  "objects": [{"cell": 1, "color": "red", "jitter": [0.0025, -0.0123], "shape": "triangle",
               "size": "large"},
              {"cell": 8, "color": "blue", "jitter": [0, 0], "shape": "diamond", "size": "small"}],
  "size_mentioned": [true, false],
  "template": 3
})";

TEST(SceneTest, ParsesAScene) {
  auto scene = ParseScene(kScene);
  ASSERT_TRUE(scene.ok()) << scene.status();
  EXPECT_EQ(scene->background.kind, BackgroundKind::kGradient);
  EXPECT_EQ(scene->background.colors, (std::vector<std::string>{"cyan", "pink"}));
  ASSERT_EQ(scene->objects.size(), 2u);
  EXPECT_EQ(scene->objects[0].color, "red");
  EXPECT_EQ(scene->objects[0].shape, Shape::kTriangle);
  EXPECT_EQ(scene->objects[0].size, Size::kLarge);
  EXPECT_EQ(scene->objects[0].cell, 1);
  EXPECT_EQ(scene->objects[0].jitter_x, 0.0025);
  EXPECT_EQ(scene->objects[0].jitter_y, -0.0123);
  EXPECT_EQ(scene->objects[1].jitter_x, 0.0);  // integer JSON numbers are fine
  EXPECT_EQ(scene->size_mentioned, (std::vector<bool>{true, false}));
  EXPECT_EQ(scene->template_index, 3);
}

TEST(SceneTest, OptionalFieldsDefault) {
  auto scene = ParseScene(
      R"({"background": {"kind": "solid", "colors": ["gray"]},
          "objects": [{"cell": 4, "color": "red", "shape": "circle", "size": "small"}]})");
  ASSERT_TRUE(scene.ok()) << scene.status();
  EXPECT_EQ(scene->objects[0].jitter_x, 0.0);
  EXPECT_EQ(scene->size_mentioned, std::vector<bool>{true});
}

TEST(SceneTest, RejectsInvalidScenes) {
  const std::string objects = R"("objects": [{"cell": 4, "color": "red", "shape": "circle",
                                  "size": "small"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "malformed JSON"},
      {"[]", "not a JSON object"},
      {"{\"objects\": []}", "missing \"background\""},
      {R"({"background": {"kind": "plaid", "colors": ["red"]}, "objects": []})", "plaid"},
      {R"({"background": {"kind": "solid", "colors": ["red", "blue"]}, "objects": []})",
       "needs 1 colour"},
      {R"({"background": {"kind": "stripes", "colors": ["red"]}, "objects": []})",
       "needs 2 colours"},
      {R"({"background": {"kind": "solid", "colors": ["mauve"]}, "objects": []})", "mauve"},
      {R"({"background": {"kind": "solid", "colors": ["red"]}})", "\"objects\""},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": 9,
          "color": "blue", "shape": "circle", "size": "small"}]})",
       "cell 9"},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": 1,
          "color": "white", "shape": "circle", "size": "small"}]})",
       "object colour \"white\""},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": 1,
          "color": "blue", "shape": "star", "size": "small"}]})",
       "star"},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": 1,
          "color": "blue", "shape": "circle", "size": "huge"}]})",
       "huge"},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": 1,
          "color": "blue", "shape": "circle", "size": "small", "jitter": [0.1]}]})",
       "jitter"},
      {R"({"background": {"kind": "solid", "colors": ["red"]}, "objects": [{"cell": "1",
          "color": "blue", "shape": "circle", "size": "small"}]})",
       "\"cell\""},
      {R"({"background": {"kind": "solid", "colors": ["gray"]}, )" + objects +
           R"(, "size_mentioned": [true, true]})",
       "size_mentioned"},
  };
  for (const auto& [json, message] : cases) {
    SCOPED_TRACE(json);
    auto scene = ParseScene(json);
    ASSERT_FALSE(scene.ok());
    EXPECT_EQ(scene.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(scene.status().message().find(message), std::string::npos)
        << scene.status().message();
  }
}

TEST(SceneTest, LoadsTheHeldoutPrompts) {
  const auto entries = testing::LoadHeldout();
  ASSERT_EQ(entries.size(), 512u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].id, static_cast<int>(i));
    EXPECT_FALSE(entries[i].prompt.empty());
    EXPECT_EQ(entries[i].mismatched.size(), 5u);
  }
}

TEST(SceneTest, HeldoutErrorsNameTheFileAndLine) {
  EXPECT_EQ(LoadHeldoutPrompts("no/such/file.jsonl").status().code(), absl::StatusCode::kNotFound);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/bad.jsonl";
  {
    std::ofstream out(path);
    out << R"({"id": 0, "prompt": "p", "scene": {"background": {"kind": "solid",)"
        << R"( "colors": ["red"]}, "objects": []}})"
        << "\n\n"
        << R"({"id": 1, "prompt": "p"})"
        << "\n";
  }
  auto entries = LoadHeldoutPrompts(path);
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("bad.jsonl:3"), std::string::npos)
      << entries.status().message();
}

}  // namespace
}  // namespace mulo::synth
