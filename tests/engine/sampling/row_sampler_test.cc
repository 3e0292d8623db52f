// Batched draws on the device: the same decisions as the host sampler given the same uniforms
// (zero-mass entries, both ends of the CDF included), AR's distribution when the uniforms come
// from the counter-based generator (chi-square, with a skewed-uniform control that must fail),
// and the argmax at temperature 0; every row's own top-k and top-p as tensors, bit for bit the
// host's filtering of that row.
#include "engine/sampling/row_sampler.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <vector>

#include "engine/sampling/logits_processor.h"
#include "engine/sampling/philox.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler.h"

namespace mulo::engine {
namespace {

// Rows of a random distribution over 64 entries, about a third of them without mass.
torch::Tensor RandomRows(int64_t rows, uint64_t seed) {
  at::manual_seed(seed);
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
  at::manual_seed(3);
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


// Per-row sampling settings and the guided logits' two streams, with ties (logits rounded to a
// tenth) so that top-k's threshold and top-p's order meet equal values.
struct FilteredRows {
  torch::Tensor cond, uncond;  // [rows, vocab]
  std::vector<SamplingParams> params;
};

FilteredRows RandomFilteredRows(int64_t rows, int64_t vocab, uint64_t seed) {
  at::manual_seed(seed);
  FilteredRows out;
  out.cond = (torch::randn({rows, vocab}) * 30).round() / 10;
  out.uncond = (torch::randn({rows, vocab}) * 30).round() / 10;
  const std::vector<int64_t> ks = {0, 1, 2, 7, vocab - 1, vocab, 40};
  const std::vector<double> ps = {1.0, 0.9, 0.5, 0.95, 1e-4, 0.3, 0.999};
  const std::vector<double> temperatures = {1.0, 0.7, 1.3, 0.0};
  for (int64_t r = 0; r < rows; ++r) {
    SamplingParams p;
    p.cfg_scale = 1.0 + 0.5 * static_cast<double>(r % 5);
    p.temperature = temperatures[r % temperatures.size()];
    p.top_k = ks[(r / 3) % ks.size()];
    p.top_p = ps[(r / 2) % ps.size()];
    out.params.push_back(p);
  }
  return out;
}

RowFilters FiltersOf(const std::vector<SamplingParams>& params) {
  std::vector<int64_t> k;
  std::vector<float> p;
  for (const SamplingParams& s : params) {
    k.push_back(s.top_k);
    p.push_back(static_cast<float>(s.top_p));
  }
  const int64_t rows = static_cast<int64_t>(params.size());
  return {torch::tensor(k).view({rows, 1}), torch::tensor(p).view({rows, 1})};
}

TEST(RowSamplerTest, RowFiltersAreTheHostsFiltersBitForBit) {
  constexpr int64_t kRows = 84, kVocab = 97;
  const FilteredRows rows = RandomFilteredRows(kRows, kVocab, 11);
  std::vector<float> cfg, temperature;
  for (const SamplingParams& p : rows.params) {
    cfg.push_back(static_cast<float>(p.cfg_scale));
    temperature.push_back(static_cast<float>(p.temperature));
  }
  const RowFilters filters = FiltersOf(rows.params);
  const torch::Tensor p =
      GuidedProbabilities(rows.cond, rows.uncond, torch::tensor(cfg).view({kRows, 1}),
                          torch::tensor(temperature).view({kRows, 1}), true, &filters);
  int64_t filtered = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const torch::Tensor host =
        ToProbabilities(MixCfg(torch::stack({rows.cond[r], rows.uncond[r]}), rows.params[r].cfg_scale),
                        rows.params[r]);
    EXPECT_TRUE(torch::equal(p[r], host)) << "row " << r << " top_k " << rows.params[r].top_k
                                          << " top_p " << rows.params[r].top_p;
    if (HasFilters(rows.params[r], kVocab) && rows.params[r].temperature > 0) {
      filtered += (host == 0).sum().item<int64_t>() > 0;
    }
  }
  EXPECT_GT(filtered, kRows / 3);  // the rows really filter something
}

TEST(RowSamplerTest, RowFiltersBroadcastOverAWindowOfRows) {
  // VerifyGraphs' layout: [requests, rows, vocab] with one setting per request.
  constexpr int64_t kRequests = 6, kWindow = 5, kVocab = 64;
  const FilteredRows rows = RandomFilteredRows(kRequests * kWindow, kVocab, 12);
  std::vector<SamplingParams> per_request;
  for (int64_t r = 0; r < kRequests; ++r) per_request.push_back(rows.params[3 * r + 1]);
  RowFilters filters = FiltersOf(per_request);
  filters.top_k = filters.top_k.view({kRequests, 1, 1});
  filters.top_p = filters.top_p.view({kRequests, 1, 1});
  const torch::Tensor tempered = rows.cond.view({kRequests, kWindow, kVocab}) / 0.8;
  const torch::Tensor out = FilterRows(tempered, filters);
  for (int64_t r = 0; r < kRequests; ++r) {
    SamplingParams s = per_request[r];
    s.temperature = 0.8;
    for (int64_t i = 0; i < kWindow; ++i) {
      EXPECT_TRUE(torch::equal(torch::softmax(out[r][i], -1),
                               ToProbabilities(rows.cond[r * kWindow + i], s)))
          << "request " << r << " row " << i;
    }
  }
}

TEST(RowSamplerTest, RowsThatFilterNothingComeBackUnchanged) {
  at::manual_seed(13);
  const torch::Tensor tempered = torch::randn({4, 50});
  const RowFilters none{torch::tensor({0, 50, 0, 50}).view({4, 1}),
                        torch::ones({4, 1}, torch::kFloat32)};
  EXPECT_TRUE(torch::equal(FilterRows(tempered, none), tempered));
  // The control: top-k 1 leaves one token.
  const RowFilters one{torch::ones({4, 1}, torch::kInt64), torch::ones({4, 1}, torch::kFloat32)};
  EXPECT_TRUE(torch::equal(torch::isfinite(FilterRows(tempered, one)).sum(1),
                           torch::ones({4}, torch::kInt64)));
  // A relaxed greedy row ranks by its unfiltered distribution; a sampled one is filtered.
  const torch::Tensor zero = torch::zeros({4, 1});
  const torch::Tensor greedy = torch::tensor({0.0f, 1.0f, 0.0f, 1.0f}).view({4, 1});
  const torch::Tensor ranked =
      GuidedProbabilities(tempered, tempered, zero, greedy, /*one_hot_greedy=*/false, &one);
  EXPECT_TRUE(torch::equal(ranked[0], torch::softmax(tempered[0], -1)));
  EXPECT_EQ((ranked[1] > 0).sum().item<int64_t>(), 1);
}

}  // namespace
}  // namespace mulo::engine
