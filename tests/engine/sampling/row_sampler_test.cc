// Batched draws on the device: the same decisions as the host sampler given the same uniforms
// (zero-mass entries, both ends of the CDF included), AR's distribution when the uniforms come
// from the counter-based generator (chi-square, with a skewed-uniform control that must fail),
// and the argmax at temperature 0.
#include "engine/sampling/row_sampler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "engine/sampling/philox.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {
namespace {

// Rows of a random distribution over 64 entries, about a third of them without mass.
torch::Tensor RandomRows(int64_t rows, uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor probs = torch::rand({rows, 64});
  probs = probs * (torch::rand({rows, 64}) > 0.33).to(torch::kFloat32);
  probs.select(1, 5).fill_(0.01f);  // every row keeps some mass
  return probs;
}

TEST(RowSamplerTest, MakesTheHostSamplersDecisionsForTheSameUniforms) {
  constexpr int64_t kRows = 300;
  const torch::Tensor probs = RandomRows(kRows, 1);
  std::vector<double> uniforms;
  std::vector<int64_t> host;
  for (int64_t i = 0; i < kRows; ++i) {
    Rng rng(static_cast<uint64_t>(i));
    Rng same(static_cast<uint64_t>(i));
    uniforms.push_back(rng.Uniform());
    host.push_back(SampleFromHostProbabilities(probs[i], same));
  }
  const torch::Tensor drawn =
      DrawRows(probs, torch::tensor(uniforms, torch::kFloat64));
  ASSERT_EQ(drawn.sizes(), torch::IntArrayRef({kRows}));
  EXPECT_EQ(std::vector<int64_t>(drawn.data_ptr<int64_t>(), drawn.data_ptr<int64_t>() + kRows),
            host);
}

TEST(RowSamplerTest, BothEndsOfTheCdfLandOnEntriesWithMass) {
  // Row 0: mass on 2 and 5 only. Row 1: mass on 0 and 63.
  torch::Tensor probs = torch::zeros({2, 64});
  probs[0][2] = 0.5f;
  probs[0][5] = 0.5f;
  probs[1][0] = 0.25f;
  probs[1][63] = 0.75f;
  const double top = 1.0 - std::ldexp(1.0, -53);
  const torch::Tensor low = DrawRows(probs, torch::tensor({0.0, 0.0}, torch::kFloat64));
  const torch::Tensor high = DrawRows(probs, torch::tensor({top, top}, torch::kFloat64));
  EXPECT_EQ(low[0].item<int64_t>(), 2);
  EXPECT_EQ(low[1].item<int64_t>(), 0);
  EXPECT_EQ(high[0].item<int64_t>(), 5);
  EXPECT_EQ(high[1].item<int64_t>(), 63);
  // Past the top by rounding (u * total above the last cumulative value): the last entry with
  // mass, never the entries after it.
  const torch::Tensor past = DrawRows(probs, torch::tensor({1.0, 1.0}, torch::kFloat64));
  EXPECT_EQ(past[0].item<int64_t>(), 5);
  EXPECT_EQ(past[1].item<int64_t>(), 63);
}

// Chi-square of `tokens` against `p` (16 entries).
double ChiSquare(const torch::Tensor& tokens, const torch::Tensor& p) {
  const torch::Tensor counts = torch::bincount(tokens, {}, p.size(0)).to(torch::kFloat64);
  const torch::Tensor expected = p.to(torch::kFloat64) / p.sum().item<double>() * tokens.numel();
  return ((counts - expected).pow(2) / expected).sum().item<double>();
}

TEST(RowSamplerTest, CounterUniformsDrawTheDistribution) {
  constexpr int64_t kDraws = 40000;
  const torch::Tensor p = torch::linspace(1, 16, 16);  // masses 1..16
  const torch::Tensor rows = p.unsqueeze(0).expand({kDraws, 16});
  const torch::Tensor u =
      CounterUniforms(11, DrawRole::kTarget, torch::arange(kDraws, torch::kInt64));
  // Critical value of 15 degrees of freedom at p = 0.001.
  constexpr double kCritical = 37.70;
  const double fair = ChiSquare(DrawRows(rows, u), p);
  const double skewed = ChiSquare(DrawRows(rows, u.pow(1.1)), p);  // control: bent uniforms
  std::cout << "[chi2] counter uniforms " << fair << ", bent uniforms " << skewed
            << " (critical " << kCritical << ")\n";
  EXPECT_LT(fair, kCritical);
  EXPECT_GT(skewed, kCritical);
}

TEST(RowSamplerTest, TemperatureZeroIsTheArgmaxAndTokensStayOnTheLogitsDevice) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({7, 32});
  SamplingParams greedy;
  greedy.temperature = 0.0;
  const torch::Tensor uniforms = torch::full({7}, 0.5, torch::kFloat64);
  EXPECT_TRUE(torch::equal(SampleRows(logits, greedy, uniforms), logits.argmax(-1)));
  SamplingParams top1;
  top1.temperature = 1.0;
  top1.top_k = 1;
  const torch::Tensor drawn = SampleRows(logits, top1, uniforms);
  EXPECT_TRUE(torch::equal(drawn, logits.argmax(-1)));
  EXPECT_EQ(drawn.device(), logits.device());
  EXPECT_EQ(drawn.scalar_type(), torch::kInt64);
}

}  // namespace
}  // namespace mulo::engine
