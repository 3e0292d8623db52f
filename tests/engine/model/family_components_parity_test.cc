// The bundled family's extra components vs their PyTorch references: text conditioner
// (tokenizer + bidirectional encoder), MuLo-SD up/down-samplers, EAGLE-style head.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/text_conditioner.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::MaxAbsDiff;
using testing::ReadAll;

constexpr double kTolerance = 1e-4;

TEST(TextConditionerParityTest, TokensAndFeaturesMatchReference) {
  auto conditioner = TextConditioner::LoadDirectory(FixtureDir("text_encoder_tiny"), LoadOptions());
  ASSERT_OK(conditioner);
  auto expected = ReadAll(FixtureDir("text_encoder_tiny") + "/expected.safetensors");
  std::ifstream in(FixtureDir("text_encoder_tiny") + "/prompt.txt");
  std::string prompt;
  std::getline(in, prompt);
  auto ids = (*conditioner)->Tokenize(prompt);
  ASSERT_OK(ids);
  auto want = expected.at("ids").flatten();
  ASSERT_EQ(static_cast<int64_t>(ids->size()), want.numel());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ((*ids)[i], want[i].item<int64_t>()) << i;
  auto features = (*conditioner)->Encode(prompt);
  ASSERT_OK(features);
  const double err = MaxAbsDiff(*features, expected.at("features").squeeze(0));
  std::cout << "[parity] text_encoder_tiny: max |features - ref| = " << err << "\n";
  EXPECT_LE(err, kTolerance);
}

TEST(TextConditionerParityTest, PromptErrorsNameTheField) {
  auto conditioner = TextConditioner::LoadDirectory(FixtureDir("text_encoder_tiny"), LoadOptions());
  ASSERT_OK(conditioner);
  auto empty = (*conditioner)->Encode("  ");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("prompt"), std::string::npos);
  auto long_prompt = (*conditioner)->Encode("a a a a a a a a a a a a a");  // 13 > 12 tokens
  EXPECT_EQ(long_prompt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(long_prompt.status().message().find("prompt: 13 tokens"), std::string::npos);
}

TEST(ResamplerParityTest, UpAndDownMatchReference) {
  auto expected = ReadAll(FixtureDir("resampler_tiny") + "/expected.safetensors");
  for (const std::string kind : {"up", "down"}) {
    auto model = Resampler::LoadDirectory(FixtureDir("resampler_tiny") + "/" + kind, LoadOptions());
    ASSERT_OK(model);
    const int64_t h = kind == "up" ? 4 : 8;
    auto ids = expected.at(kind + "_ids").to(torch::kInt64);
    auto logits = (*model)->Logits(ids, h, h);
    ASSERT_OK(logits);
    ASSERT_EQ(logits->sizes(), expected.at(kind + "_logits").sizes());
    const double err = MaxAbsDiff(*logits, expected.at(kind + "_logits"));
    std::cout << "[parity] resampler " << kind << ": max |logits - ref| = " << err << "\n";
    EXPECT_LE(err, kTolerance);
    auto applied = (*model)->Apply(ids, h, h);
    ASSERT_OK(applied);
    EXPECT_TRUE(torch::equal(*applied, logits->argmax(1).flatten(1)));
    // The host-vector form gives the same ids for each image of the batch.
    for (int64_t b = 0; b < ids.size(0); ++b) {
      auto row = ids[b].contiguous();
      auto host = (*model)->Apply(
          std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()), h,
          h);
      ASSERT_OK(host);
      auto want = (*applied)[b].contiguous();
      EXPECT_EQ(*host, std::vector<int64_t>(want.data_ptr<int64_t>(),
                                            want.data_ptr<int64_t>() + want.numel()));
    }
  }
}

// Row causality, the property MuLo-SD relies on: changing input rows >= k leaves output rows
// that only depend on rows < k untouched.
//
// Feeds `resampler` a random h x w grid and a copy whose rows from `changed_from` on are
// overwritten: the first `unchanged_out` output rows must be identical, the rest must differ.
void ExpectRowCausal(const Resampler& resampler, int64_t h, int64_t w, int64_t changed_from,
                     int64_t unchanged_out, int64_t fill) {
  auto ids = torch::randint(128, {1, h * w}, torch::kInt64);
  auto changed = ids.clone().view({h, w});
  changed.narrow(0, changed_from, h - changed_from).fill_(fill);
  auto a = resampler.Logits(ids, h, w), b = resampler.Logits(changed.view({1, h * w}), h, w);
  ASSERT_OK(a);
  ASSERT_OK(b);
  const int64_t out_rows = a->size(2);
  EXPECT_EQ(MaxAbsDiff(a->narrow(2, 0, unchanged_out), b->narrow(2, 0, unchanged_out)), 0.0);
  EXPECT_GT(MaxAbsDiff(a->narrow(2, unchanged_out, out_rows - unchanged_out),
                       b->narrow(2, unchanged_out, out_rows - unchanged_out)),
            0.0);
}

TEST(ResamplerParityTest, ConvolutionsAreRowCausal) {
  auto up = Resampler::LoadDirectory(FixtureDir("resampler_tiny") + "/up", LoadOptions());
  auto down = Resampler::LoadDirectory(FixtureDir("resampler_tiny") + "/down", LoadOptions());
  ASSERT_OK(up);
  ASSERT_OK(down);
  at::manual_seed(3);
  // 4x4 drafter grid, rows 2-3 changed: target rows 0-3 (of 8) stay.
  ExpectRowCausal(**up, 4, 4, 2, 4, 7);
  // 8x8 target grid, rows 4-7 changed: drafter rows 0-1 (of 4) stay.
  ExpectRowCausal(**down, 8, 8, 4, 2, 9);
}

TEST(EagleHeadParityTest, PredictedFeaturesMatchReference) {
  auto target = LoadFixtureModel("tar_tiny");
  ASSERT_NE(target, nullptr);
  auto head = EagleHead::LoadDirectory(FixtureDir("eagle_tiny"), *target, LoadOptions());
  ASSERT_OK(head);
  auto expected = ReadAll(FixtureDir("eagle_tiny") + "/expected.safetensors");
  KvCache cache = (*head)->NewCache(2, 4);
  auto out = (*head)->Forward(cache, expected.at("embeddings"), expected.at("features"),
                              torch::Tensor());
  ASSERT_OK(out);
  const double err = MaxAbsDiff(*out, expected.at("predicted"));
  std::cout << "[parity] eagle_tiny: max |features - ref| = " << err << "\n";
  EXPECT_LE(err, kTolerance);
  // Incremental: the same 5 positions one at a time through the head's own cache.
  KvCache step = (*head)->NewCache(2, 4);
  for (int64_t i = 0; i < 5; ++i) {
    auto one = (*head)->Forward(step, expected.at("embeddings").narrow(1, i, 1),
                                expected.at("features").narrow(1, i, 1), torch::Tensor());
    ASSERT_OK(one);
    EXPECT_LE(MaxAbsDiff(*one, expected.at("predicted").narrow(1, i, 1)), kTolerance);
  }
}

}  // namespace
}  // namespace mulo::engine
