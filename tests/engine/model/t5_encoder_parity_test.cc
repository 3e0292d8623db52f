// C++ T5 v1.1 encoder (engine/model/t5_encoder) against the PyTorch reference written from
// transformers' T5EncoderModel (tools/reference/t5.py), loaded from what
// tools/convert/hf_t5_encoder.py kept of a tiny full T5 checkpoint in the Hugging Face layout
// (decoder and LM head dropped): features for a padded batch of a short and a long caption (160
// positions, relative distances past max_distance) agree to float tolerance.
#include <gtest/gtest.h>

#include "engine/model/caption_condition.h"
#include "engine/model/t5_encoder.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;
using testing::ReadAll;

TEST(T5EncoderParityTest, FeaturesMatchTheReference) {
  auto model = T5Encoder::LoadDirectory(FixtureDir("t5_encoder_tiny") + "/encoder",
                                        LoadOptions());
  ASSERT_OK(model);
  auto expected = ReadAll(FixtureDir("t5_encoder_tiny") + "/expected.safetensors");
  auto features = (*model)->Encode(expected.at("ids").to(torch::kInt64), expected.at("mask"));
  ASSERT_OK(features);
  const torch::Tensor& ref = expected.at("features");
  ASSERT_EQ(features->sizes(), ref.sizes());
  const double scale = ref.abs().max().item<double>();
  const double err = MaxAbsDiff(*features, ref);
  std::cout << "[parity] t5_encoder_tiny: max |features - ref| = " << err << " (scale " << scale
            << ")\n";
  EXPECT_LE(err, 1e-4 * scale);
}

TEST(T5EncoderTest, RelativeBucketsFollowT5) {
  // 32 buckets, max_distance 128: 0..7 exact, then logarithmic to 15; keys after the query
  // (positive) in 16..31.
  const torch::Tensor relative =
      torch::tensor({0, -1, -7, -8, -12, -127, -500, 1, 7, 8, 200}, torch::kInt64);
  const torch::Tensor buckets = T5Encoder::RelativeBuckets(relative, 32, 128);
  const std::vector<int64_t> got(buckets.data_ptr<int64_t>(),
                                 buckets.data_ptr<int64_t>() + buckets.numel());
  EXPECT_EQ(got, std::vector<int64_t>({0, 1, 7, 8, 9, 15, 15, 17, 23, 24, 31}));
}

TEST(T5EncoderTest, RefusesBadInputNamingTheField) {
  auto model = T5Encoder::LoadDirectory(FixtureDir("t5_encoder_tiny") + "/encoder",
                                        LoadOptions());
  ASSERT_OK(model);
  const torch::Tensor ids = torch::ones({1, 4}, torch::kInt64);
  EXPECT_EQ((*model)->Encode(ids, torch::ones({1, 3})).status().message(),
            "mask: expected the shape of ids");
  EXPECT_EQ((*model)->Encode(ids * 200, torch::ones({1, 4})).status().message(),
            "ids: must be in [0, 200)");
  EXPECT_EQ((*model)->Encode(ids.to(torch::kInt32), torch::ones({1, 4})).status().message(),
            "ids: expected int64 [batch, n >= 1]");
}

// LlamaGen t2i's left padding of the features (sample_t2i.py): the 9 real tokens' rows of the
// reference's features last, the 151 padded rows first and zero, caption_length 9.
TEST(T5CaptionConditionTest, RealRowsGoLastPaddedRowsFirstAndZero) {
  auto model = T5Encoder::LoadDirectory(FixtureDir("t5_encoder_tiny") + "/encoder",
                                        LoadOptions());
  ASSERT_OK(model);
  auto expected = ReadAll(FixtureDir("t5_encoder_tiny") + "/expected.safetensors");
  const torch::Tensor ids = expected.at("ids").to(torch::kInt64)[0].contiguous();
  const torch::Tensor mask = expected.at("mask").to(torch::kInt64)[0].contiguous();
  const std::vector<int64_t> id_list(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 160);
  const std::vector<int64_t> mask_list(mask.data_ptr<int64_t>(),
                                       mask.data_ptr<int64_t>() + 160);
  auto condition = T5CaptionCondition(**model, id_list, mask_list, 160);
  ASSERT_OK(condition);
  EXPECT_EQ(condition->caption_length, 9);
  ASSERT_EQ(condition->features.sizes(), (std::vector<int64_t>{160, 48}));
  const torch::Tensor ref = expected.at("features")[0];
  EXPECT_LE(MaxAbsDiff(condition->features.narrow(0, 151, 9), ref.narrow(0, 0, 9)), 1e-4);
  EXPECT_EQ(condition->features.narrow(0, 0, 151).abs().max().item<double>(), 0.0);

  EXPECT_EQ(T5CaptionCondition(**model, id_list, mask_list, 120).status().message(),
            "caption_ids: 160 tokens; the family's condition takes 120");
  std::vector<int64_t> holes = mask_list;
  holes[20] = 1;
  EXPECT_EQ(T5CaptionCondition(**model, id_list, holes, 160).status().message(),
            "caption_mask: the real tokens must come first, then padding");
  EXPECT_EQ(T5CaptionCondition(**model, id_list, std::vector<int64_t>(160, 0), 160)
                .status()
                .message(),
            "caption_mask: no real token");
}

}  // namespace
}  // namespace mulo::engine
