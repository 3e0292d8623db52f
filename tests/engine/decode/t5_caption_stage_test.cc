// LlamaGen t2i's text stage on a tiny family (llamagen_t2i_tiny, 6 caption rows 32 wide, with a
// FLAN-T5 encoder of that width written here): FLAN-T5 ids through the family's pipeline give
// the features, caption_length and image tokens that upstream's padded, masked, left-padded
// features sent directly give; refusals name the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/decode/ar.h"
#include "engine/decode/generate.h"
#include "engine/model/caption_condition.h"
#include "engine/model/model_set.h"
#include "engine/model/safetensors.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;

constexpr int64_t kVocab = 50;

// A T5 v1.1 encoder component (the layout convert.py hf-t5-encoder writes) with random
// weights: 1 block, d_model `width`, 4 heads of 8.
void WriteT5(const std::string& dir, int64_t width) {
  std::filesystem::create_directories(dir);
  const int64_t heads = 4, d_kv = 8, d_ff = 48, inner = heads * d_kv;
  std::ofstream(dir + "/config.json") << nlohmann::json{
      {"architecture", "t5_encoder"}, {"d_model", width},     {"d_kv", d_kv},
      {"d_ff", d_ff},                 {"num_layers", 1},      {"num_heads", heads},
      {"vocab_size", kVocab},         {"num_buckets", 32},    {"max_distance", 128},
      {"norm_eps", 1e-6}}.dump(2);
  at::manual_seed(3);
  auto r = [](std::vector<int64_t> shape) { return torch::randn(shape) * 0.5; };
  const std::string a = "block.0.layer.0.", f = "block.0.layer.1.";
  std::map<std::string, torch::Tensor> tensors = {
      {"embed_tokens.weight", r({kVocab, width})},
      {a + "SelfAttention.q.weight", r({inner, width})},
      {a + "SelfAttention.k.weight", r({inner, width})},
      {a + "SelfAttention.v.weight", r({inner, width})},
      {a + "SelfAttention.o.weight", r({width, inner})},
      {a + "SelfAttention.relative_attention_bias.weight", r({32, heads})},
      {a + "layer_norm.weight", torch::ones({width})},
      {f + "DenseReluDense.wi_0.weight", r({d_ff, width})},
      {f + "DenseReluDense.wi_1.weight", r({d_ff, width})},
      {f + "DenseReluDense.wo.weight", r({width, d_ff})},
      {f + "layer_norm.weight", torch::ones({width})},
      {"final_layer_norm.weight", torch::ones({width})},
  };
  ASSERT_OK(WriteSafetensors(dir + "/model.safetensors", tensors));
}

// llamagen_t2i_tiny + vq_tiny + a T5 of `width` as components.t5.
std::string TinyT2iDir(const std::string& name, int64_t width) {
  namespace fs = std::filesystem;
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  fs::create_directories(dir);
  fs::create_directory_symlink(fs::absolute(FixtureDir("llamagen_t2i_tiny")), dir + "/target");
  fs::create_directory_symlink(fs::absolute(FixtureDir("vq_tiny")), dir + "/vq");
  WriteT5(dir + "/t5", width);
  std::ofstream(dir + "/family.json")
      << nlohmann::json{{"name", name},
                        {"components", {{"target", "target"}, {"vq", "vq"}, {"t5", "t5"}}}}
             .dump(2);
  return dir;
}

class NullSink : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

TEST(T5CaptionStageTest, CaptionIdsGiveTheImageTheirFeaturesGive) {
  const std::string dir = TinyT2iDir("t2i", 32);
  auto family = LoadModelSet(dir, LoadOptions());
  ASSERT_OK(family);
  ASSERT_EQ(family->pipeline.size(), 1u);
  EXPECT_EQ(family->pipeline[0]->name(), "t5");
  ASSERT_NE(family->StageReading(ConditionForm::kCaptionIds), nullptr);
  auto encoder = T5Encoder::LoadDirectory(dir + "/t5", LoadOptions());
  ASSERT_OK(encoder);
  SamplingParams sampling;
  sampling.temperature = 0.0;
  CancelToken cancel;
  NullSink sink;
  // 3 real tokens (the last the end token 1): left-padded into 6 rows; 6: all rows.
  for (const std::vector<int64_t>& ids :
       {std::vector<int64_t>{7, 12, 1}, std::vector<int64_t>{7, 12, 30, 4, 9, 1}}) {
    Condition caption;
    caption.caption_ids = ids;
    Stats stats;
    auto staged = RunConditionPipeline(*family, caption, 0, cancel, {}, stats);
    ASSERT_OK(staged);
    // Upstream: padded to the rows with id 0, masked, then the real rows moved last.
    std::vector<int64_t> padded = ids, mask(ids.size(), 1);
    padded.resize(6, 0);
    mask.resize(6, 0);
    auto expected = T5CaptionCondition(**encoder, padded, mask, 6);
    ASSERT_OK(expected);
    EXPECT_EQ(staged->caption_length, static_cast<int64_t>(ids.size()));
    EXPECT_TRUE(torch::equal(staged->features, expected->features));
    EXPECT_TRUE(staged->caption_ids.empty());
    EXPECT_GT(stats.PhaseSeconds(Phase::kTextStage), 0.0);

    auto from_ids = GenerateImage(ArDecoder(), *family, caption, sampling, sink, cancel);
    auto from_features = GenerateImage(ArDecoder(), *family, *expected, sampling, sink, cancel);
    ASSERT_OK(from_ids);
    ASSERT_OK(from_features);
    EXPECT_EQ(from_ids->tokens, from_features->tokens);
    EXPECT_GT(from_ids->stats.PhaseSeconds(Phase::kTextStage), 0.0);
  }
}

TEST(T5CaptionStageTest, RefusalsNameTheField) {
  auto family = LoadModelSet(TinyT2iDir("t2i_refusals", 32), LoadOptions());
  ASSERT_OK(family);
  CancelToken cancel;
  for (const std::vector<int64_t>& ids :
       {std::vector<int64_t>(7, 3),                 // past the 6 rows
        std::vector<int64_t>{3, kVocab, 1},         // past the vocabulary
        std::vector<int64_t>{3, -2, 1}}) {          // negative
    Condition caption;
    caption.caption_ids = ids;
    Stats stats;
    auto refused = RunConditionPipeline(*family, caption, 0, cancel, {}, stats);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message().rfind("caption_ids", 0), 0u)
        << refused.status().message();
  }
  // A T5 whose width is not the GPT's caption width does not load, naming the component.
  auto narrow = LoadModelSet(TinyT2iDir("t2i_narrow", 24), LoadOptions());
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().message().rfind("t5", 0), 0u) << narrow.status().message();
}

}  // namespace
}  // namespace mulo::engine
