// A Qwen2 language model as a token model (the architecture interface, issue 43): its image
// tokens are a range of its text vocabulary, its condition the prompt's text ids. The decoding
// methods run on it unchanged: ar's greedy tokens equal a constrained greedy continuation
// computed from the text logits by hand, the lossless Jacobi methods reproduce ar, and the
// registry picks the class from config.json's "architecture".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/model/architectures.h"
#include "engine/model/causal_lm.h"
#include "engine/model/model_set.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;

constexpr int64_t kOffset = 128;  // image token k is text id 128 + k
constexpr int64_t kCount = 256;   // the rest of the tiny vocabulary (384)
constexpr int64_t kGrid = 4;

// qwen2_tiny's converted weights with a config naming `architecture` and, when count > 0,
// image tokens; in a fresh temporary directory.
std::string ImageLmDir(const std::string& name, const std::string& architecture, int64_t count) {
  const std::string source = FixtureDir("qwen2_tiny") + "/lm";
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  nlohmann::json config;
  std::ifstream(source + "/config.json") >> config;
  config["architecture"] = architecture;
  if (count > 0) {
    config["image_token_offset"] = kOffset;
    config["image_token_count"] = count;
  }
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::filesystem::copy_file(source + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

std::shared_ptr<const TokenModel> LoadImageLm() {
  auto model = LoadTokenModel({ImageLmDir("qwen2_image", "qwen2", kCount), LoadOptions(), kGrid});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? *model : nullptr;
}

const std::vector<int64_t> kPrompt = {3, 77, 5, 200, 41, 9};

DecodeRequest Request(double temperature, uint64_t seed = 0) {
  DecodeRequest request;
  request.condition.prompt_ids = kPrompt;
  request.sampling.cfg_scale = 1.0;
  request.sampling.temperature = temperature;
  request.sampling.seed = seed;
  return request;
}

class NullSink : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

std::vector<int32_t> Decode(const std::string& method, const ModelSet& models,
                            const DecodeRequest& request) {
  auto config = DefaultMethodConfig(method, models);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto decoder = MakeMethod(*config, models);
  EXPECT_TRUE(decoder.ok()) << decoder.status().ToString();
  if (!decoder.ok()) return {};
  NullSink sink;
  CancelToken cancel;
  auto result = (*decoder)->Decode(request, models, sink, cancel);
  EXPECT_TRUE(result.ok()) << method << ": " << result.status().ToString();
  return result.ok() ? result->tokens : std::vector<int32_t>();
}

TEST(ImageTokenLmTest, RegistryPicksTheClassFromTheArchitecture) {
  auto model = LoadImageLm();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->architecture(), "qwen2");
  EXPECT_NE(dynamic_cast<const CausalLm*>(model.get()), nullptr);
  EXPECT_EQ(model->vocab_size(), kCount);
  EXPECT_EQ(model->grid_size(), kGrid);
  EXPECT_EQ(model->condition_shape().mode, ConditionMode::kPromptIds);
  EXPECT_EQ(model->condition_shape().rows, 128 - kGrid * kGrid);  // max_positions - tokens

  auto llamagen = LoadTokenModel({FixtureDir("tar_tiny"), LoadOptions()});
  ASSERT_OK(llamagen);
  EXPECT_EQ((*llamagen)->architecture(), "llamagen");

  auto unknown = LoadTokenModel({ImageLmDir("unknown", "mamba", kCount), LoadOptions(), kGrid});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("architecture"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("qwen2"), std::string::npos);  // lists the known

  auto text_only = LoadTokenModel({ImageLmDir("text_only", "qwen2", 0), LoadOptions(), kGrid});
  ASSERT_FALSE(text_only.ok());
  EXPECT_NE(text_only.status().message().find("image_token_count"), std::string::npos);

  auto no_grid = LoadTokenModel({ImageLmDir("no_grid", "qwen2", kCount), LoadOptions()});
  ASSERT_FALSE(no_grid.ok());
  EXPECT_NE(no_grid.status().message().find("grid"), std::string::npos);
}

TEST(ImageTokenLmTest, LogitsAreTheTextLogitsOfTheImageTokens) {
  auto model = LoadImageLm();
  ASSERT_NE(model, nullptr);
  const auto& lm = dynamic_cast<const CausalLm&>(*model);
  const std::vector<int64_t> image = {0, 17, 255, 3};  // image-token ids
  std::vector<int64_t> text = kPrompt;
  for (int64_t k : image) text.push_back(kOffset + k);

  KvCache text_cache = lm.NewCache(1, 32);
  auto text_logits = lm.Forward(text_cache, torch::tensor(text).unsqueeze(0));
  ASSERT_OK(text_logits);

  Condition condition;
  condition.prompt_ids = kPrompt;
  auto embedded = model->EmbedCondition(condition, /*with_null=*/false);
  ASSERT_OK(embedded);
  KvCache cache = model->NewCache(1, 32);
  auto prefill = model->Prefill(cache, *embedded, LogitsMode::kLast);
  ASSERT_OK(prefill);
  const int64_t rows = static_cast<int64_t>(kPrompt.size());
  auto positions =
      torch::arange(model->TokenPosition(rows, 0), model->TokenPosition(rows, 4), torch::kInt64);
  auto tokens =
      model->ForwardTokens(cache, torch::tensor(image).unsqueeze(0), positions, LogitsMode::kAll);
  ASSERT_OK(tokens);
  const auto expected = text_logits->narrow(2, kOffset, kCount);
  EXPECT_LE(testing::MaxAbsDiff(prefill->logits, expected.narrow(1, rows - 1, 1)), 1e-5);
  EXPECT_LE(testing::MaxAbsDiff(tokens->logits, expected.narrow(1, rows, 4)), 1e-5);
}

TEST(ImageTokenLmTest, ArGreedyIsTheConstrainedGreedyContinuation) {
  ModelSet models;
  models.name = "qwen2_image";
  models.target = LoadImageLm();
  ASSERT_NE(models.target, nullptr);
  const auto& lm = dynamic_cast<const CausalLm&>(*models.target);

  // By hand: the argmax over the image tokens' text logits, fed back as text ids.
  std::vector<int32_t> expected;
  KvCache cache = lm.NewCache(1, 64);
  torch::Tensor next = torch::tensor(kPrompt).unsqueeze(0);
  for (int64_t i = 0; i < kGrid * kGrid; ++i) {
    auto logits = lm.Forward(cache, next, /*last_only=*/true);
    ASSERT_OK(logits);
    const int64_t k = logits->view({-1}).narrow(0, kOffset, kCount).argmax().item<int64_t>();
    expected.push_back(static_cast<int32_t>(k));
    next = torch::tensor({kOffset + k}).unsqueeze(0);
  }
  const std::vector<int32_t> ar = Decode("ar", models, Request(0.0));
  EXPECT_EQ(ar, expected);
  // The lossless single-model methods reproduce it.
  for (const std::string method : {"sjd", "mc_sjd", "sjd_pac"}) {
    EXPECT_EQ(Decode(method, models, Request(0.0)), expected) << method;
  }
}

TEST(ImageTokenLmTest, SampledTokensStayInsideTheImageRange) {
  ModelSet models;
  models.name = "qwen2_image";
  models.target = LoadImageLm();
  ASSERT_NE(models.target, nullptr);
  for (const std::string method : {"ar", "sjd"}) {
    const std::vector<int32_t> tokens = Decode(method, models, Request(1.0, 7));
    ASSERT_EQ(tokens.size(), static_cast<size_t>(kGrid * kGrid)) << method;
    for (int32_t t : tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, kCount);
    }
    EXPECT_EQ(Decode(method, models, Request(1.0, 7)), tokens) << method << ": seeded";
  }
}

TEST(ImageTokenLmTest, BadConditionsNameTheirField) {
  auto model = LoadImageLm();
  ASSERT_NE(model, nullptr);
  Condition empty;
  auto none = model->EmbedCondition(empty, false);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("prompt_ids"), std::string::npos);

  Condition outside;
  outside.prompt_ids = {1, 384};
  auto bad_id = model->EmbedCondition(outside, false);
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.status().message().find("prompt_ids"), std::string::npos);

  Condition too_long;
  too_long.prompt_ids.assign(128 - kGrid * kGrid + 1, 1);
  EXPECT_FALSE(model->EmbedCondition(too_long, false).ok());

  Condition fine;
  fine.prompt_ids = kPrompt;
  auto guided = model->EmbedCondition(fine, /*with_null=*/true);
  ASSERT_FALSE(guided.ok());
  EXPECT_NE(guided.status().message().find("cfg_scale"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
