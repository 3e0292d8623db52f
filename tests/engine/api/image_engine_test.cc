// The engine's façade (engine/api/image_engine.h): Plan checks a request against the family and
// names the field it refuses; Run decodes exactly what GenerateImage decodes for the same
// inputs; Preview of every row is the final image; request options reach the method's config
// in the spec's order (a preset before the options it would replace).
#include "engine/api/image_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mulo::engine {
namespace {

class ImageEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = ImageEngine::Load("tests/data/repository/tiny", LoadOptions());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    engine_ = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }

  static ImageRequest Prompted(const std::string& method) {
    ImageRequest request;
    request.prompt = "a red circle";
    request.method = method;
    request.sampling.seed = 7;
    return request;
  }

  static ImageEngine* engine_;
};
ImageEngine* ImageEngineTest::engine_ = nullptr;

class Rows : public ProgressSink {
 public:
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>& tokens) override {
    EXPECT_EQ(first_row, rows);
    rows += num_rows;
    committed.insert(committed.end(), tokens.begin(), tokens.end());
  }
  int64_t rows = 0;
  std::vector<int32_t> committed;
};

TEST_F(ImageEngineTest, RunsWhatGenerateImageRunsAndPreviewsTheSameImage) {
  auto plan = engine_->Plan(Prompted("ar"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->method, "ar");
  EXPECT_EQ(plan->prompt, "a red circle");
  EXPECT_EQ(plan->sampling.cfg_scale, engine_->models().default_cfg_scale);  // unset: family's
  ASSERT_EQ(plan->kv_demand.needs.size(), 1u);     // ar opens the target alone
  EXPECT_EQ(plan->kv_demand.needs[0].streams, 2);  // CFG guides with a second stream
  Rows rows;
  auto run = engine_->Run(*plan, rows, CancelToken(), GenerateOptions());
  ASSERT_TRUE(run.ok()) << run.status().ToString();

  NullProgressSink none;
  auto direct = GenerateImage(*plan->decoder, engine_->models(), "a red circle", plan->sampling,
                              none, CancelToken());
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(run->tokens, direct->tokens);
  EXPECT_EQ(rows.committed, run->tokens);
  EXPECT_EQ(rows.rows, engine_->grid_size());

  auto preview = engine_->Preview(run->tokens, engine_->grid_size());
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  EXPECT_EQ(preview->width, run->image.width);
  EXPECT_EQ(preview->height, run->image.height);
  EXPECT_EQ(preview->pixels, run->image.pixels);
  const std::vector<int32_t> first_rows(run->tokens.begin(),
                                        run->tokens.begin() + 4 * engine_->grid_size());
  auto top = engine_->Preview(first_rows, 4);  // the first rows alone
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->width, run->image.width);
  EXPECT_LT(top->height, run->image.height);
}

TEST_F(ImageEngineTest, RefusalsNameTheField) {
  const int64_t rows = engine_->models().target->condition_shape().rows;
  const int64_t width = engine_->models().target->condition_shape().width;
  struct Case {
    std::string what;
    void (*change)(ImageRequest&, int64_t);
    std::string prefix;
  };
  const std::vector<Case> cases = {
      {"features of the wrong size",
       [](ImageRequest& r, int64_t) {
         r.prompt.clear();
         r.features.assign(5, 0.f);
       },
       "condition: 5 floats, expected " + std::to_string(rows) + " x " + std::to_string(width)},
      {"a NaN feature",
       [](ImageRequest& r, int64_t n) {
         r.prompt.clear();
         r.features.assign(n, 0.f);
         r.features[3] = std::nanf("");
       },
       "condition: contains NaN"},
      {"caption_length without features",
       [](ImageRequest& r, int64_t) { r.condition.caption_length = 3; }, "caption_length:"},
      {"a class label on a prompt family",
       [](ImageRequest& r, int64_t) { r.condition.class_label = 2; }, "class_label:"},
      {"nothing to condition on", [](ImageRequest& r, int64_t) { r.prompt.clear(); },
       "prompt: required"},
      {"top_k past the vocabulary", [](ImageRequest& r, int64_t) { r.sampling.top_k = 100000; },
       "sampling.top_k:"},
      {"an unknown method", [](ImageRequest& r, int64_t) { r.method = "nope"; },
       "method: unknown 'nope'"},
      {"an option out of bounds",
       [](ImageRequest& r, int64_t) {
         r.method = "speculative";
         r.method_options = {{"gamma", 0.0, ""}};
       },
       "speculative.gamma:"},
      {"a choice the option does not have",
       [](ImageRequest& r, int64_t) {
         r.method = "mulo";
         r.method_options = {{"pooling", 0.0, "7"}};
       },
       "mulo.pooling: 7 is not ADDITIVE, MULTIPLICATIVE or NO_POOLING"},
      {"a text stage on a family without one",
       [](ImageRequest& r, int64_t) { r.text_stage_method = "ar"; }, "text_stage_method:"},
  };
  for (const Case& c : cases) {
    ImageRequest request = Prompted("ar");
    c.change(request, rows * width);
    auto plan = engine_->Plan(std::move(request));
    ASSERT_FALSE(plan.ok()) << c.what;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(plan.status().message().rfind(c.prefix, 0), 0u)
        << c.what << ": " << plan.status().message();
  }
  // An option the method's spec does not have is the server's bug, not the client's.
  ImageRequest unknown = Prompted("speculative");
  unknown.method_options = {{"no_such_option", 1.0, ""}};
  EXPECT_EQ(engine_->Plan(std::move(unknown)).status().code(), StatusCode::kInternal);
}

TEST_F(ImageEngineTest, FeaturesBecomeTheCondition) {
  const ConditionShape& shape = engine_->models().target->condition_shape();
  ImageRequest request = Prompted("ar");
  request.prompt.clear();
  request.features.assign(shape.rows * shape.width, 0.25f);
  auto plan = engine_->Plan(std::move(request));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->prompt.empty());
  ASSERT_TRUE(plan->condition.features.defined());
  EXPECT_EQ(plan->condition.features.sizes(), (std::vector<int64_t>{shape.rows, shape.width}));
  EXPECT_FLOAT_EQ(plan->condition.features.sum().item<float>(),
                  0.25f * static_cast<float>(shape.rows * shape.width));
}

TEST_F(ImageEngineTest, OptionsApplyAfterThePresetWhateverTheirOrder) {
  ImageRequest request = Prompted("mulo");
  request.method_options = {{"tau", 0.5, ""}, {"preset", 0.0, "PAPER"}};
  auto plan = engine_->Plan(std::move(request));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->method_config.mulo.tau, 0.5);  // PAPER first, then tau over it
  EXPECT_EQ(plan->method_config.mulo.radius, PaperMuloOptions().radius);

  ImageRequest speculative = Prompted("speculative");
  speculative.method_options = {{"gamma", 6.0, ""}};
  auto six = engine_->Plan(std::move(speculative));
  ASSERT_TRUE(six.ok()) << six.status().ToString();
  EXPECT_EQ(six->method_config.speculative.gamma, 6);
  EXPECT_EQ(six->decoder->name(), "speculative");

  auto automatic = engine_->Plan(Prompted("auto"));
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  EXPECT_NE(automatic->method, "auto");  // what it chose, and why
  EXPECT_FALSE(automatic->method_config.chosen_by.empty());
}

TEST_F(ImageEngineTest, DescribesWhatTheFamilyTakes) {
  const FamilyDescription family = engine_->Describe();
  const ConditionShape& shape = engine_->models().target->condition_shape();
  EXPECT_EQ(family.conditions, (std::vector<std::string>{"prompt", "condition"}));
  EXPECT_EQ(family.condition_width, shape.width);
  EXPECT_EQ(family.condition_rows, shape.rows);
  EXPECT_EQ(family.grid_size, engine_->grid_size());
  EXPECT_EQ(family.methods, AvailableMethods(engine_->models()));
  EXPECT_EQ(family.default_cfg_scale, engine_->models().default_cfg_scale);
  EXPECT_NE(family.auto_method.find("no cpu calibration"), std::string::npos) << family.auto_method;
}

}  // namespace
}  // namespace mulo::engine
