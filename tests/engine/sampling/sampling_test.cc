// Logits processing and seeded sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/sampling/logits_processor.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::MaxAbsDiff;

TEST(LogitsProcessorTest, CfgMixIsUncondPlusScaledDifference) {
  auto cond = torch::tensor({1.0f, 2.0f, 3.0f});
  auto uncond = torch::tensor({0.5f, 2.5f, 1.0f});
  auto mixed = MixCfg(torch::stack({cond, uncond}), 4.0);
  EXPECT_LE(MaxAbsDiff(mixed, uncond + 4.0 * (cond - uncond)), 1e-6);
  EXPECT_LE(MaxAbsDiff(MixCfg(torch::stack({cond, uncond}), 1.0), cond), 1e-6);
}

TEST(LogitsProcessorTest, TemperatureZeroIsOneHotArgmax) {
  SamplingParams p;
  p.temperature = 0.0;
  auto probs = ToProbabilities(torch::tensor({0.1f, 3.0f, 3.0f, -1.0f}), p);
  EXPECT_TRUE(torch::equal(probs, torch::tensor({0.0f, 1.0f, 0.0f, 0.0f})));  // first max
}

TEST(LogitsProcessorTest, TemperatureScalesLogits) {
  SamplingParams p;
  p.temperature = 2.0;
  auto logits = torch::tensor({1.0f, 2.0f, 4.0f});
  EXPECT_LE(MaxAbsDiff(ToProbabilities(logits, p), torch::softmax(logits / 2.0, -1)), 1e-6);
}

TEST(LogitsProcessorTest, TopKKeepsTheKLargest) {
  SamplingParams p;
  p.top_k = 2;
  auto probs = ToProbabilities(torch::tensor({1.0f, 4.0f, 2.0f, 3.0f}), p);
  EXPECT_EQ(probs[0].item<float>(), 0.0f);
  EXPECT_EQ(probs[2].item<float>(), 0.0f);
  auto kept = torch::softmax(torch::tensor({4.0f, 3.0f}), -1);
  EXPECT_NEAR(probs[1].item<float>(), kept[0].item<float>(), 1e-6);
  EXPECT_NEAR(probs[3].item<float>(), kept[1].item<float>(), 1e-6);
}

TEST(LogitsProcessorTest, TopPKeepsTheSmallestNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (in shuffled order).
  auto logits = torch::log(torch::tensor({0.15f, 0.5f, 0.05f, 0.3f}));
  SamplingParams p;
  p.top_p = 0.7;  // 0.5 < 0.7 so the second token (0.3) is needed; the rest are dropped
  auto probs = ToProbabilities(logits, p);
  EXPECT_EQ(probs[0].item<float>(), 0.0f);
  EXPECT_EQ(probs[2].item<float>(), 0.0f);
  EXPECT_NEAR(probs[1].item<float>(), 0.5f / 0.8f, 1e-5);
  EXPECT_NEAR(probs[3].item<float>(), 0.3f / 0.8f, 1e-5);
  p.top_p = 0.1;  // the top token always stays
  probs = ToProbabilities(logits, p);
  EXPECT_NEAR(probs[1].item<float>(), 1.0f, 1e-6);
}

TEST(SamplingParamsTest, ValidationNamesTheField) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(ValidateSamplingParams(p, 100).message().find("sampling.temperature"),
            std::string::npos);
  p = SamplingParams();
  p.top_k = 101;
  EXPECT_NE(ValidateSamplingParams(p, 100).message().find("sampling.top_k"), std::string::npos);
  p = SamplingParams();
  p.cfg_scale = NAN;
  EXPECT_NE(ValidateSamplingParams(p, 100).message().find("sampling.cfg_scale"),
            std::string::npos);
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams(), 100).ok());
}

TEST(RngTest, DeterministicPerSeedAndStream) {
  Rng a(42), b(42), c(43), d(42, RngStream::kDrafter);
  std::set<uint64_t> firsts;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    firsts.insert(x);
  }
  EXPECT_EQ(firsts.size(), 100u);
  EXPECT_NE(Rng(42).Next(), c.Next());
  EXPECT_NE(Rng(42).Next(), d.Next());
}

TEST(RngTest, UniformIsInUnitIntervalWithRightMean) {
  Rng rng(1);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of U(0,1) has sd 1/sqrt(12 n) ~ 0.00065; 6 sd bound.
  EXPECT_NEAR(sum / n, 0.5, 0.004);
}

// The sampler reproduces the distribution: chi-square over 8 categories, 40k draws. The
// 99.9% quantile of chi-square with 7 degrees of freedom is 24.3.
TEST(SamplerTest, DrawsFollowTheDistribution) {
  auto probs = torch::tensor({0.30f, 0.20f, 0.15f, 0.10f, 0.10f, 0.08f, 0.05f, 0.02f});
  Rng rng(123);
  const int n = 40000;
  std::vector<int> counts(8, 0);
  for (int i = 0; i < n; ++i) counts[SampleFromProbabilities(probs, rng)]++;
  double chi2 = 0;
  for (int k = 0; k < 8; ++k) {
    const double e = n * probs[k].item<double>();
    chi2 += (counts[k] - e) * (counts[k] - e) / e;
  }
  EXPECT_LT(chi2, 24.3);
}

TEST(SamplerTest, NeverDrawsZeroProbabilityTokens) {
  auto probs = torch::tensor({0.0f, 0.5f, 0.0f, 0.5f, 0.0f});
  Rng rng(9);
  for (int i = 0; i < 5000; ++i) {
    const int64_t t = SampleFromProbabilities(probs, rng);
    ASSERT_TRUE(t == 1 || t == 3);
  }
}

// The device draw (used on CUDA tensors) run on the CPU: the index the host draw picks with
// the same stream, trailing and inner zeros included, in one int64 [1].
TEST(SamplerTest, TheDeviceDrawPicksTheHostDrawsIndex) {
  const auto probs = torch::tensor({0.0f, 0.3f, 0.0f, 0.25f, 0.2f, 0.25f, 0.0f, 0.0f});
  Rng device(77), host(77);
  for (int i = 0; i < 2000; ++i) {
    const torch::Tensor index = DrawIndexOnDevice(probs, device);
    ASSERT_EQ(index.sizes(), torch::IntArrayRef({1}));
    ASSERT_EQ(index.scalar_type(), torch::kInt64);
    ASSERT_EQ(index.item<int64_t>(), SampleFromHostProbabilities(probs, host)) << "draw " << i;
  }
}

// SampleToken split at its read (PrepareTokenDraw, FinishTokenDraw) draws SampleToken's
// tokens from the same stream, greedy and sampled.
TEST(SamplerTest, APreparedDrawFinishesAsSampleToken) {
  const auto logits = torch::tensor({0.5f, 2.0f, 1.0f, -1.0f, 1.5f});
  for (double temperature : {0.0, 1.0}) {
    SamplingParams params;
    params.temperature = temperature;
    Rng split(11), whole(11);
    for (int i = 0; i < 200; ++i) {
      const PreparedTokenDraw draw = PrepareTokenDraw(logits, params, split);
      const int64_t token = FinishTokenDraw(draw, draw.to_read.to(draw.dtype), split);
      ASSERT_EQ(token, SampleToken(logits, params, whole)) << "temperature " << temperature;
    }
    EXPECT_EQ(split.Next(), whole.Next()) << "the streams moved apart";
  }
}

TEST(SamplerTest, GreedyConsumesNoRandomness) {
  SamplingParams greedy;
  greedy.temperature = 0.0;
  Rng a(5), b(5);
  EXPECT_EQ(SampleToken(torch::tensor({0.0f, 2.0f, 1.0f}), greedy, a), 1);
  EXPECT_EQ(a.Next(), b.Next());
}

}  // namespace
}  // namespace mulo::engine
