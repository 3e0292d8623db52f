// C++ transformer vs the PyTorch reference (tools/reference/transformer.py), fp32.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureCondition;
using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::MaxAbsDiff;
using testing::ReadAll;
using testing::TempPath;

constexpr double kTolerance = 1e-4;

class TransformerParityTest : public ::testing::TestWithParam<std::string> {};

// One forward over [condition, tokens] with CFG's two streams, as the reference computes it.
TEST_P(TransformerParityTest, FullForwardMatchesReference) {
  auto model = LoadFixtureModel(GetParam());
  ASSERT_NE(model, nullptr);
  auto expected = ReadAll(FixtureDir(GetParam()) + "/expected.safetensors");
  auto condition = model->EmbedCondition(FixtureCondition(*model, expected), /*with_null=*/true);
  ASSERT_OK(condition);
  auto tokens = expected.at("tokens").to(torch::kInt64).repeat({2, 1});
  auto token_embeddings = model->EmbedTokens(tokens);
  ASSERT_OK(token_embeddings);
  auto embeddings = torch::cat({*condition, *token_embeddings}, 1);
  const int64_t length = embeddings.size(1);
  KvCache cache = model->NewCache(2, length);
  auto out = model->Forward(cache, embeddings, torch::arange(length, torch::kInt64),
                            torch::Tensor(), LogitsMode::kAll);
  ASSERT_OK(out);
  const auto& ref_logits = expected.at("logits");
  ASSERT_EQ(out->logits.sizes(), ref_logits.sizes());
  const double logit_err = MaxAbsDiff(out->logits, ref_logits);
  const double hidden_err = MaxAbsDiff(out->hidden, expected.at("hidden"));
  std::cout << "[parity] " << GetParam() << ": max |logits - ref| = " << logit_err
            << ", max |hidden - ref| = " << hidden_err << " (logit scale "
            << ref_logits.abs().max().item<double>() << ")\n";
  EXPECT_LE(logit_err, kTolerance);
  EXPECT_LE(hidden_err, kTolerance);
  // The unconditional stream must differ from the conditional one (CFG is real).
  EXPECT_GT(MaxAbsDiff(out->logits[0], out->logits[1]), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TransformerParityTest,
                         ::testing::Values("tar_tiny", "llamagen_c2i_tiny", "llamagen_t2i_tiny"));

TEST(TransformerLoadTest, ConfigsSelectTheUpstreamVariants) {
  auto tar = LoadFixtureModel("tar_tiny");
  auto c2i = LoadFixtureModel("llamagen_c2i_tiny");
  ASSERT_NE(tar, nullptr);
  ASSERT_NE(c2i, nullptr);
  EXPECT_EQ(tar->config().position_mode, PositionMode::kAbsPe);
  EXPECT_EQ(tar->config().condition_mode, ConditionMode::kClipCond);
  EXPECT_EQ(c2i->config().position_mode, PositionMode::kRope2d);
  EXPECT_EQ(c2i->config().n_kv_head, 2);
}

TEST(TransformerLoadTest, ConditionShapeErrorsNameTheField) {
  auto tar = LoadFixtureModel("tar_tiny");
  ASSERT_NE(tar, nullptr);
  Condition bad;
  bad.features = torch::zeros({3, 5});
  auto out = tar->EmbedCondition(bad, true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("condition.features"), std::string::npos);

  auto c2i = LoadFixtureModel("llamagen_c2i_tiny");
  ASSERT_NE(c2i, nullptr);
  Condition label;
  label.class_label = 10;  // num_classes = 10, so the largest valid label is 9
  auto out2 = c2i->EmbedCondition(label, true);
  ASSERT_FALSE(out2.ok());
  EXPECT_NE(out2.status().message().find("class_label: 10 is outside [0, 10)"), std::string::npos);
}

// Upstream LlamaGen t2i (gpt.py's MLP: fc1 and fc2 with bias=False) stores no cap_proj
// biases. The fixture, converted from an upstream-layout file, has none, and the caption
// projection is exactly upstream's fc2(gelu_tanh(fc1(x))).
TEST(TransformerLoadTest, CaptionMlpWithoutBiasesIsUpstreamsFormula) {
  std::map<std::string, torch::Tensor> weights =
      ReadAll(FixtureDir("llamagen_t2i_tiny") + "/model.safetensors");
  EXPECT_EQ(weights.count("cls_embedding.cap_proj.fc1.bias"), 0u);
  EXPECT_EQ(weights.count("cls_embedding.cap_proj.fc2.bias"), 0u);
  auto model = LoadFixtureModel("llamagen_t2i_tiny");
  ASSERT_NE(model, nullptr);
  const TransformerConfig& c = model->config();
  Condition caption;
  caption.features = torch::randn({c.cls_token_num, c.cond_dim});
  auto embedded = model->EmbedCondition(caption, /*with_null=*/false);
  ASSERT_TRUE(embedded.ok()) << embedded.status().message();
  const auto w1 = weights["cls_embedding.cap_proj.fc1.weight"].to(torch::kFloat32);
  const auto w2 = weights["cls_embedding.cap_proj.fc2.weight"].to(torch::kFloat32);
  const torch::Tensor expected =
      torch::matmul(torch::gelu(torch::matmul(caption.features, w1.t()), "tanh"), w2.t());
  EXPECT_LT(MaxAbsDiff(embedded->reshape(expected.sizes()), expected), 1e-5);
}

// A prompt shorter than the caption window: upstream left-pads the T5 features, zeroes the
// padding, and in generate() multiplies the causal mask's condition columns by the caption
// mask and sets the diagonal, in both CFG halves. The reference computes exactly that over
// the full window (caption_logits); the engine runs only the real caption rows and must give
// the same logits for every row the image depends on.
TEST(TransformerLoadTest, CaptionPaddingMaskMatchesUpstreamsLeftPaddedGeneration) {
  auto model = LoadFixtureModel("llamagen_t2i_tiny");
  ASSERT_NE(model, nullptr);
  auto expected = ReadAll(FixtureDir("llamagen_t2i_tiny") + "/expected.safetensors");
  const int64_t cls = model->config().cls_token_num;
  const int64_t length = expected.at("caption_length").item<int64_t>();
  ASSERT_GT(length, 0);
  ASSERT_LT(length, cls);
  Condition condition = FixtureCondition(*model, expected);
  condition.caption_length = length;
  auto embedded = model->EmbedCondition(condition, /*with_null=*/true);
  ASSERT_OK(embedded);
  ASSERT_EQ(embedded->size(1), length);
  KvCache cache = model->NewCache(2, model->config().max_positions());
  auto prefill = model->Prefill(cache, *embedded, LogitsMode::kAll);
  ASSERT_OK(prefill);
  EXPECT_EQ(cache.length(), length);
  auto tokens = expected.at("tokens").to(torch::kInt64).repeat({2, 1});
  const int64_t n = tokens.size(1);
  auto rest = model->ForwardTokens(cache, tokens,
                                   torch::arange(cls, cls + n, torch::kInt64), LogitsMode::kAll);
  ASSERT_OK(rest);
  const auto& ref = expected.at("caption_logits");
  const double caption_err =
      MaxAbsDiff(prefill->logits, ref.narrow(1, cls - length, length));
  const double image_err = MaxAbsDiff(rest->logits, ref.narrow(1, cls, n));
  std::cout << "[parity] t2i caption length " << length << " of " << cls
            << ": max |logits - ref| = " << std::max(caption_err, image_err) << "\n";
  EXPECT_LE(caption_err, kTolerance);
  EXPECT_LE(image_err, kTolerance);
  // The mask matters: attending the padding (the full window) gives other logits.
  EXPECT_GT(MaxAbsDiff(expected.at("logits").narrow(1, cls, n), ref.narrow(1, cls, n)), 1e-2);

  Condition too_long = condition;
  too_long.caption_length = cls + 1;
  EXPECT_EQ(model->EmbedCondition(too_long, true).status().code(),
            StatusCode::kInvalidArgument);
  auto tar = LoadFixtureModel("tar_tiny");
  Condition features =
      FixtureCondition(*tar, ReadAll(FixtureDir("tar_tiny") + "/expected.safetensors"));
  features.caption_length = 1;
  auto refused = tar->EmbedCondition(features, true);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("caption_length"), std::string::npos);
}

TEST(TransformerLoadTest, OutOfRangeTokensAndPositionsAreErrors) {
  auto tar = LoadFixtureModel("tar_tiny");
  ASSERT_NE(tar, nullptr);
  KvCache cache = tar->NewCache(1, 8);
  auto bad_token = tar->ForwardTokens(cache, torch::full({1, 1}, 128, torch::kInt64),
                                      torch::zeros({1}, torch::kInt64), LogitsMode::kLast);
  EXPECT_EQ(bad_token.status().code(), StatusCode::kInvalidArgument);
  auto bad_position = tar->ForwardTokens(cache, torch::zeros({1, 1}, torch::kInt64),
                                         torch::full({1}, 1000, torch::kInt64), LogitsMode::kLast);
  EXPECT_EQ(bad_position.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(cache.length(), 0);  // failed forwards leave the cache untouched
}

}  // namespace
}  // namespace mulo::engine
