#include "tests/engine/decode/sd_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "engine/model/eagle_head.h"
#include "engine/model/resampler.h"
#include "engine/model/transformer.h"
#include "engine/sampling/guidance.h"
#include "engine/sampling/logits_processor.h"
#include "tests/engine/test_util.h"

namespace mulo::engine::testing {

SdFixture LoadSd() {
  SdFixture f;
  auto target = Transformer::LoadDirectory(FixtureDir("sd_tiny/target"), LoadOptions());
  auto chain = Transformer::LoadDirectory(FixtureDir("sd_tiny/chain"), LoadOptions());
  EXPECT_TRUE(target.ok() && chain.ok());
  f.models.target = *target;
  f.models.chain = *chain;
  auto eagle = EagleHead::LoadDirectory(FixtureDir("sd_tiny/eagle"), **target, LoadOptions());
  EXPECT_TRUE(eagle.ok());
  f.models.eagle = *eagle;
  f.condition.features = ReadAll(FixtureDir("sd_tiny/condition.safetensors")).at("cond");
  return f;
}

SdFixture LoadMuloTiny() {
  SdFixture f;
  const std::string dir = FixtureDir("mulo_tiny");
  auto target = Transformer::LoadDirectory(dir + "/target", LoadOptions());
  auto drafter = Transformer::LoadDirectory(dir + "/drafter", LoadOptions());
  auto up = Resampler::LoadDirectory(dir + "/upsampler", LoadOptions());
  auto down = Resampler::LoadDirectory(dir + "/downsampler", LoadOptions());
  EXPECT_TRUE(target.ok() && drafter.ok() && up.ok() && down.ok());
  f.models.target = *target;
  f.models.drafter = *drafter;
  f.models.upsampler = *up;
  f.models.downsampler = *down;
  f.models.neighbors =
      std::make_shared<const LatentNeighbors>(LatentNeighbors::Build((*up)->codebook(), 1000));
  f.condition.features = ReadAll(dir + "/condition.safetensors").at("cond");
  return f;
}

StatusOr<DecodeResult> RunMethod(const DecodingMethod& method, const SdFixture& f,
                                 const SamplingParams& sampling) {
  NullProgressSink sink;
  CancelToken cancel;
  DecodeRequest request{f.condition, sampling};
  return method.Decode(request, f.models, sink, cancel);
}

// AR's exact distribution of tokens 1 and 2 (marginals), by enumerating the target.
std::pair<std::vector<double>, std::vector<double>> ExactMarginals(const SdFixture& f,
                                                                   const SamplingParams& s) {
  const TokenModel& t = *f.models.target;
  const int64_t v = t.vocab_size();
  auto cond = t.EmbedCondition(f.condition, true);
  auto dist = [&](const std::vector<int64_t>& prefix) {
    KvCache cache = t.NewCache(2, 8);
    auto out = t.Prefill(cache, *cond, LogitsMode::kLast);
    torch::Tensor logits = out->logits;
    if (!prefix.empty()) {
      auto ids = torch::tensor(prefix, torch::kInt64).unsqueeze(0).repeat({2, 1});
      auto pos =
          torch::arange(t.TokenPosition(t.condition_shape().rows, 0),
                        t.TokenPosition(t.condition_shape().rows, prefix.size()), torch::kInt64);
      logits = t.ForwardTokens(cache, ids, pos, LogitsMode::kLast)->logits;
    }
    return ToProbabilities(GuidedLogits(logits, s.cfg_scale).select(0, 0), s).to(torch::kFloat64);
  };
  std::vector<double> m1(v, 0.0), m2(v, 0.0);
  auto p0 = dist({});
  for (int64_t a = 0; a < v; ++a) {
    auto p1 = dist({a});
    for (int64_t b = 0; b < v; ++b) {
      const double pab = p0[a].item<double>() * p1[b].item<double>();
      m1[b] += pab;
      auto p2 = dist({a, b});
      for (int64_t c = 0; c < v; ++c) m2[c] += pab * p2[c].item<double>();
    }
  }
  return {m1, m2};
}

// Pearson chi-square of observed counts against expected probabilities, bins with an
// expectation under 5 pooled; returns (statistic, degrees of freedom).
std::pair<double, int> ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs,
                                 int n) {
  double stat = 0, pooled_obs = 0, pooled_exp = 0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 5) {
      pooled_obs += counts[i];
      pooled_exp += e;
      continue;
    }
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (pooled_exp > 0) {
    stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1e-9);
    ++bins;
  }
  return {stat, bins - 1};
}

// 99.9% quantile of chi-square with df degrees of freedom (Wilson-Hilferty approximation).
double ChiSquareCritical(int df) {
  const double z = 3.090;  // standard normal 99.9% quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

DistributionCheck SampleAndCompare(const SdFixture& f, const DecodingMethod& method, int runs) {
  SamplingParams s;
  s.temperature = 1.0;
  s.cfg_scale = 2.0;
  auto [m1, m2] = ExactMarginals(f, s);
  std::vector<int> c1(m1.size(), 0), c2(m2.size(), 0);
  for (int seed = 0; seed < runs; ++seed) {
    s.seed = 100000 + seed;
    auto r = RunMethod(method, f, s);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) break;
    c1[r->tokens[1]]++;
    c2[r->tokens[2]]++;
  }
  auto [x1, df1] = ChiSquare(c1, m1, runs);
  auto [x2, df2] = ChiSquare(c2, m2, runs);
  return {x1, ChiSquareCritical(df1), x2, ChiSquareCritical(df2)};
}

}  // namespace mulo::engine::testing
