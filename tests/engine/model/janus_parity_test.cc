// Janus-Pro's generation path (engine/model/janus_model) against the PyTorch reference written
// from deepseek-ai/Janus (tools/reference/janus.py), loaded from what tools/convert/hf_janus.py
// wrote from a tiny random checkpoint in the upstream layout (tests/data/janus_tiny, made by
// tools/reference/make_fixtures.py): the guidance pair (inner prompt ids -> the pad id), the
// image logits over the prompt and five codes (gen_aligner(gen_embed) in, gen_head out) in one
// forward and a code at a time, and upstream's greedy CFG loop's 16 codes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/architectures.h"
#include "engine/model/janus_model.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;
using testing::ReadAll;

constexpr double kCfg = 5.0;  // the fixture's (upstream's generation script's) guidance weight

std::vector<int64_t> Ids(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous().view({-1});
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

class JanusParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_ = ReadAll(FixtureDir("janus_tiny") + "/expected.safetensors");
    auto model = JanusModel::LoadDirectory(FixtureDir("janus_tiny") + "/janus", LoadOptions(), 4);
    ASSERT_OK(model);
    model_ = *model;
    condition_.prompt_ids = Ids(expected_.at("ids"));
  }
  std::map<std::string, torch::Tensor> expected_;
  std::shared_ptr<const JanusModel> model_;
  Condition condition_;
};

TEST_F(JanusParityTest, TheRegistryLoadsItAsJanus) {
  auto model = LoadTokenModel({FixtureDir("janus_tiny") + "/janus", LoadOptions(), 4});
  ASSERT_OK(model);
  EXPECT_EQ((*model)->architecture(), "janus");
  EXPECT_EQ((*model)->vocab_size(), 128);
  EXPECT_EQ((*model)->grid_size(), 4);
  EXPECT_EQ((*model)->condition_shape().mode, ConditionMode::kPromptIds);
  EXPECT_EQ((*model)->condition_shape().rows, 64 - 16);
}

TEST_F(JanusParityTest, TheGuidancePairPadsTheInnerPromptIds) {
  EXPECT_TRUE(torch::equal(JanusModel::GuidancePair(condition_.prompt_ids, 258),
                           expected_.at("pair").to(torch::kInt64)));
  EXPECT_TRUE(torch::equal(JanusModel::GuidancePair({256, 262}, 258),
                           torch::tensor({256, 262, 256, 262}, torch::kInt64).view({2, 2})));
}

TEST_F(JanusParityTest, ImageLogitsMatchTheReference) {
  const torch::Tensor& ref = expected_.at("logits");  // [2, 6, 128]
  const torch::Tensor codes = expected_.at("codes").to(torch::kInt64);  // [2, 5]
  const double scale = ref.abs().max().item<double>();
  auto embeddings = model_->EmbedCondition(condition_, /*with_null=*/true);
  ASSERT_OK(embeddings);
  const int64_t n = embeddings->size(1);

  // The prompt, then the five codes at once.
  KvCache whole = model_->NewCache(2, model_->CacheRows(n));
  auto prefill = model_->Prefill(whole, *embeddings, LogitsMode::kLast);
  ASSERT_OK(prefill);
  EXPECT_LE(MaxAbsDiff(prefill->logits, ref.narrow(1, 0, 1)), 1e-4 * scale);
  const torch::Tensor positions = torch::arange(n, n + 5, torch::kInt64);
  auto fed = model_->ForwardTokens(whole, codes, positions, LogitsMode::kAll);
  ASSERT_OK(fed);
  const double err = MaxAbsDiff(fed->logits, ref.narrow(1, 1, 5));
  std::cout << "[parity] janus_tiny: max |logits - ref| = " << err << " (scale " << scale
            << ")\n";
  EXPECT_LE(err, 1e-4 * scale);
  // HeadLogits is the same head over the hidden states.
  EXPECT_LE(MaxAbsDiff(model_->HeadLogits(fed->hidden), fed->logits), 1e-5 * scale);

  // One code at a time through the cache: the same logits.
  KvCache stepped = model_->NewCache(2, model_->CacheRows(n));
  ASSERT_OK(model_->Prefill(stepped, *embeddings, LogitsMode::kLast));
  for (int64_t i = 0; i < 5; ++i) {
    auto row = model_->ForwardTokens(stepped, codes.narrow(1, i, 1),
                                     torch::tensor({n + i}, torch::kInt64), LogitsMode::kAll);
    ASSERT_OK(row);
    EXPECT_LE(MaxAbsDiff(row->logits, ref.narrow(1, i + 1, 1)), 1e-4 * scale) << "code " << i;
  }
}

TEST_F(JanusParityTest, GreedyGuidedCodesAreUpstreamsLoop) {
  auto embeddings = model_->EmbedCondition(condition_, /*with_null=*/true);
  ASSERT_OK(embeddings);
  const int64_t n = embeddings->size(1);
  KvCache cache = model_->NewCache(2, model_->CacheRows(n));
  auto out = model_->Prefill(cache, *embeddings, LogitsMode::kLast);
  ASSERT_OK(out);
  std::vector<int64_t> codes;
  for (int64_t i = 0; i < 16; ++i) {
    // upstream: logit_uncond + cfg_weight * (logit_cond - logit_uncond), then the argmax.
    const torch::Tensor last = out->logits.select(1, 0);
    const int64_t code = (last[1] + kCfg * (last[0] - last[1])).argmax().item<int64_t>();
    codes.push_back(code);
    out = model_->ForwardTokens(cache, torch::full({2, 1}, code, torch::kInt64),
                                torch::tensor({n + i}, torch::kInt64), LogitsMode::kAll);
    ASSERT_OK(out);
  }
  EXPECT_EQ(codes, Ids(expected_.at("greedy")));
}

TEST_F(JanusParityTest, BadPromptIdsAreRefusedNamingTheField) {
  Condition empty;
  auto none = model_->EmbedCondition(empty, true);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("prompt_ids"), std::string::npos);
  Condition outside;
  outside.prompt_ids = {256, 320, 262};
  auto bad = model_->EmbedCondition(outside, true);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("prompt_ids: 320"), std::string::npos);
  Condition too_long;
  too_long.prompt_ids.assign(49, 1);
  EXPECT_EQ(model_->EmbedCondition(too_long, false).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(JanusParityTest, LoadingRefusesAMissingGridAndForeignTensors) {
  auto no_grid = JanusModel::LoadDirectory(FixtureDir("janus_tiny") + "/janus", LoadOptions(), 0);
  EXPECT_EQ(no_grid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_grid.status().message().find("grid_size"), std::string::npos);
  auto too_big = JanusModel::LoadDirectory(FixtureDir("janus_tiny") + "/janus", LoadOptions(), 8);
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("max_positions"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
