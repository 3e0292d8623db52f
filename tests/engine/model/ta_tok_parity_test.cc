// C++ TA-Tok de-quantiser vs the PyTorch reference (tools/reference/ta_tok.py, which
// tests/tools/convert_test.py checks against an independent formulation of upstream's
// SigLIP2 decoder), loaded from a file the converter wrote from an upstream-layout
// ta_tok.pth.
#include <gtest/gtest.h>

#include <vector>

#include "engine/model/ta_tok_dequantizer.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;
using testing::ReadAll;

std::vector<int64_t> Ids(const torch::Tensor& t) {
  auto c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Grids larger (5x5) and smaller (3x3) than the 4x4 position table, as Tar's 27x27, 13x13
// and 9x9 grids are against its 16x16 table: the antialiased resize both ways.
TEST(TaTokParityTest, FeaturesMatchReference) {
  auto model = TaTokDequantizer::LoadDirectory(FixtureDir("ta_tok_tiny"), LoadOptions());
  ASSERT_OK(model);
  auto expected = ReadAll(FixtureDir("ta_tok_tiny") + "/expected.safetensors");
  for (int side : {5, 3}) {
    const std::string s = std::to_string(side);
    auto features = (*model)->Decode(Ids(expected.at("ids_" + s)));
    ASSERT_OK(features);
    const auto& ref = expected.at("features_" + s);
    ASSERT_EQ(features->sizes(), ref.sizes());
    const double err = MaxAbsDiff(*features, ref);
    std::cout << "[parity] ta_tok_tiny " << side << "x" << side
              << ": max |features - ref| = " << err << " (scale "
              << ref.abs().max().item<double>() << ")\n";
    EXPECT_LE(err, 1e-5);
  }
}

TEST(TaTokParityTest, BadIdsAreRefusedNamingTheField) {
  auto model = TaTokDequantizer::LoadDirectory(FixtureDir("ta_tok_tiny"), LoadOptions());
  ASSERT_OK(model);
  const int64_t codebook = (*model)->config().codebook_size;
  for (const auto& ids : {std::vector<int64_t>(8, 0), std::vector<int64_t>{},
                          std::vector<int64_t>{0, 1, 2, codebook}, std::vector<int64_t>{-1}}) {
    auto out = (*model)->Decode(ids);
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(out.status().message().rfind("condition_tokens: ", 0), 0u)
        << out.status().message();
  }
}

}  // namespace
}  // namespace mulo::engine
