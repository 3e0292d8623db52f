// A tiny Janus-Pro family (tests/data/janus_tiny/janus, converted from the upstream layout, with
// vq_tiny; grid 4 from family.json) through the decoding methods: ar's greedy codes are
// upstream's greedy CFG loop's (tools/reference/janus.py); the training-free methods (sjd, gsd,
// mc_sjd, sjd_pac, and zipar with a window of the grid's width) reproduce them greedily, and
// that zipar draws ar's seeded codes at temperature 1 too; a default zipar window wider than
// this grid is refused naming zipar.window; the listing offers exactly the
// methods that need no trained component, and the others are refused naming what is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::ReadAll;

class NullSink : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

std::string JanusFamilyDir() {
  namespace fs = std::filesystem;
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/janus-tiny";
  if (fs::exists(dir)) return dir;
  fs::create_directories(dir);
  fs::create_directory_symlink(fs::absolute(FixtureDir("janus_tiny") + "/janus"), dir + "/target");
  fs::create_directory_symlink(fs::absolute(FixtureDir("vq_tiny")), dir + "/vq");
  std::ofstream(dir + "/family.json")
      << nlohmann::json{{"name", "janus-tiny"},
                        {"default_cfg_scale", 5.0},
                        {"grid_size", 4},
                        {"pixel_rounding", "truncate"},
                        {"components", {{"target", "target"}, {"vq", "vq"}}}}
             .dump(2);
  return dir;
}

class JanusMethodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto family = LoadModelSet(JanusFamilyDir(), LoadOptions());
    ASSERT_OK(family);
    family_ = *std::move(family);
    auto expected = ReadAll(FixtureDir("janus_tiny") + "/expected.safetensors");
    auto ids = expected.at("ids").to(torch::kInt64).contiguous();
    prompt_.prompt_ids.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    auto greedy = expected.at("greedy").to(torch::kInt64).contiguous();
    for (int64_t i = 0; i < greedy.numel(); ++i) {
      upstream_greedy_.push_back(static_cast<int32_t>(greedy[i].item<int64_t>()));
    }
  }

  StatusOr<GenerateResult> Run(const std::string& name, double temperature, uint64_t seed,
                               int64_t zipar_window = 0) {
    MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(name, family_));
    if (zipar_window > 0) config.zipar.window = zipar_window;
    MULO_ASSIGN_OR_RETURN(std::shared_ptr<const DecodingMethod> method,
                          MakeMethod(config, family_));
    SamplingParams sampling;
    sampling.temperature = temperature;
    sampling.cfg_scale = family_.default_cfg_scale;
    sampling.seed = seed;
    CancelToken cancel;
    NullSink sink;
    return GenerateImage(*method, family_, prompt_, sampling, sink, cancel);
  }

  ModelSet family_;
  Condition prompt_;
  std::vector<int32_t> upstream_greedy_;
};

TEST_F(JanusMethodsTest, ArGreedyIsUpstreamsGuidedLoopAndDecodesAnImage) {
  EXPECT_EQ(family_.target->architecture(), "janus");
  EXPECT_EQ(family_.target->grid_size(), 4);
  auto ar = Run("ar", 0.0, 0);
  ASSERT_OK(ar);
  EXPECT_EQ(ar->tokens, upstream_greedy_);
  EXPECT_EQ(ar->image.width, 4 * family_.vq->config().downsample_factor());
  EXPECT_EQ(ar->image.pixels.size(),
            static_cast<size_t>(ar->image.width * ar->image.height * 3));
}

TEST_F(JanusMethodsTest, TrainingFreeMethodsReproduceArGreedily) {
  // zipar with a window of the grid's width (a smaller one is relaxed: rows overlap).
  for (const std::string name : {"sjd", "gsd", "mc_sjd", "sjd_pac", "zipar"}) {
    auto result = Run(name, 0.0, 0, name == "zipar" ? 4 : 0);
    ASSERT_OK(result);
    EXPECT_EQ(result->tokens, upstream_greedy_) << name;
  }
}

TEST_F(JanusMethodsTest, AZipArWindowWiderThanTheGridIsRefusedNamingIt) {
  auto refused = Run("zipar", 0.0, 0);  // the paper's 8 on a 4-wide grid
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("zipar.window: must be in [1, 4]", 0), 0u)
      << refused.status().message();
}

TEST_F(JanusMethodsTest, ZipArWithAGridRowWindowIsArAtTemperatureOne) {
  for (uint64_t seed : {1, 2, 3}) {
    auto ar = Run("ar", 1.0, seed);
    auto zipar = Run("zipar", 1.0, seed, /*zipar_window=*/4);
    ASSERT_OK(ar);
    ASSERT_OK(zipar);
    EXPECT_EQ(zipar->tokens, ar->tokens) << "seed " << seed;
  }
}

TEST_F(JanusMethodsTest, OffersTheTrainingFreeMethodsAndRefusesTheOthersNamingTheComponent) {
  const std::vector<std::string> available = AvailableMethods(family_);
  for (const std::string name : {"ar", "sjd", "gsd", "zipar", "mc_sjd", "sjd_pac"}) {
    EXPECT_NE(std::find(available.begin(), available.end(), name), available.end()) << name;
  }
  for (const std::string name : {"speculative", "mulo", "eagle", "lantern", "peanut"}) {
    EXPECT_EQ(std::find(available.begin(), available.end(), name), available.end()) << name;
    MethodConfig config;
    config.name = name;
    auto refused = MakeMethod(config, family_);
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message().rfind("method: '" + name + "' needs", 0), 0u)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace mulo::engine
