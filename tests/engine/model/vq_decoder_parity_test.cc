// C++ VQ decoder vs the PyTorch reference (tools/reference/vq_decoder.py), fp32.
#include <gtest/gtest.h>

#include "engine/model/vq_decoder.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;
using testing::ReadAll;

TEST(VqDecoderParityTest, PixelsMatchReference) {
  auto vq = VqDecoder::LoadDirectory(FixtureDir("vq_tiny"), LoadOptions());
  ASSERT_OK(vq);
  auto expected = ReadAll(FixtureDir("vq_tiny") + "/expected.safetensors");
  auto ids = expected.at("ids").to(torch::kInt64);
  auto pixels = (*vq)->Decode(ids, 8, 8);
  ASSERT_OK(pixels);
  ASSERT_EQ(pixels->sizes(), expected.at("pixels").sizes());
  EXPECT_EQ(pixels->size(2), 8 * (*vq)->config().downsample_factor());
  const double err = MaxAbsDiff(*pixels, expected.at("pixels"));
  std::cout << "[parity] vq_tiny: max |pixels - ref| = " << err << "\n";
  EXPECT_LE(err, 1e-4);
}

TEST(VqDecoderParityTest, Uint8ImageMatchesReference) {
  auto vq = VqDecoder::LoadDirectory(FixtureDir("vq_tiny"), LoadOptions());
  ASSERT_OK(vq);
  auto expected = ReadAll(FixtureDir("vq_tiny") + "/expected.safetensors");
  auto ids = expected.at("ids").to(torch::kInt64);
  for (int64_t b = 0; b < ids.size(0); ++b) {
    auto row = ids[b];
    std::vector<int32_t> tokens(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    auto image = (*vq)->DecodeToRgb(tokens, 8, 8);
    ASSERT_OK(image);
    EXPECT_EQ(image->width, 16);
    EXPECT_EQ(image->height, 16);
    ASSERT_EQ(image->pixels.size(), 16u * 16u * 3u);
    auto ref = expected.at("image")[b].flatten().to(torch::kInt64);
    int64_t worst = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      worst = std::max<int64_t>(worst, std::abs(image->pixels[i] - ref[i].item<int64_t>()));
    }
    EXPECT_LE(worst, 1);  // rounding at exact .5 boundaries may differ by one level
  }
}

// Tar casts clamp(x * 0.5 + 0.5, 0, 1) * 255 to uint8, which truncates: a Tar family decodes
// byte for byte as Tar does (up to float noise at exact level boundaries), and differently
// from the rounding default on many values.
TEST(VqDecoderParityTest, TruncatedUint8ImageMatchesTars) {
  auto vq = VqDecoder::LoadDirectory(FixtureDir("vq_tiny"), LoadOptions());
  ASSERT_OK(vq);
  auto expected = ReadAll(FixtureDir("vq_tiny") + "/expected.safetensors");
  auto ids = expected.at("ids").to(torch::kInt64);
  int64_t mismatches = 0, differs_from_rounding = 0, total = 0;
  for (int64_t b = 0; b < ids.size(0); ++b) {
    auto row = ids[b];
    std::vector<int32_t> tokens(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    auto truncated = (*vq)->DecodeToRgb(tokens, 8, 8, PixelRounding::kTruncate);
    auto rounded = (*vq)->DecodeToRgb(tokens, 8, 8, PixelRounding::kNearest);
    ASSERT_OK(truncated);
    ASSERT_OK(rounded);
    auto ref = expected.at("image_truncated")[b].flatten().to(torch::kInt64);
    for (int64_t i = 0; i < ref.numel(); ++i, ++total) {
      const int64_t got = truncated->pixels[i];
      EXPECT_LE(std::abs(got - ref[i].item<int64_t>()), 1);
      mismatches += got != ref[i].item<int64_t>();
      differs_from_rounding += got != rounded->pixels[i];
    }
  }
  std::cout << "[parity] vq_tiny truncated: " << mismatches << " of " << total
            << " bytes off by one from Tar's; " << differs_from_rounding
            << " differ from rounding\n";
  EXPECT_LE(mismatches, total / 100);
  EXPECT_GT(differs_from_rounding, total / 10);
}

TEST(VqDecoderParityTest, CodebookIsL2Normalised) {
  auto vq = VqDecoder::LoadDirectory(FixtureDir("vq_tiny"), LoadOptions());
  ASSERT_OK(vq);
  auto norms = (*vq)->codebook().norm(2, -1);
  EXPECT_LE(MaxAbsDiff(norms, torch::ones_like(norms)), 1e-5);
}

TEST(VqDecoderParityTest, BadIdsAreInvalidArgument) {
  auto vq = VqDecoder::LoadDirectory(FixtureDir("vq_tiny"), LoadOptions());
  ASSERT_OK(vq);
  std::vector<int32_t> ids(64, 0);
  ids[5] = 128;  // codebook_size = 128
  EXPECT_EQ((*vq)->DecodeToRgb(ids, 8, 8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*vq)->DecodeToRgb(std::vector<int32_t>(10, 0), 8, 8).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mulo::engine
