// The sd_tiny family (a 4x4-token target over 16 codes, a correlated chain draft model and an
// EAGLE-style head) and the losslessness check every lossless method's test runs: AR's exact
// distribution of tokens 1 and 2 by enumerating the target, against a method's samples
// (Pearson chi-square at the 99.9% quantile).
#ifndef MULO_TESTS_ENGINE_DECODE_SD_FIXTURE_H_
#define MULO_TESTS_ENGINE_DECODE_SD_FIXTURE_H_

#include <utility>
#include <vector>

#include "engine/decode/decoding_method.h"
#include "engine/model/model_set.h"

namespace mulo::engine::testing {

struct SdFixture {
  ModelSet models;
  Condition condition;
};

SdFixture LoadSd();

// The mulo_tiny family: an 8x8-token target, a 4x4 drafter, U_2 / D_2 and latent neighbours.
SdFixture LoadMuloTiny();

// Sampling at `temperature` with guidance `cfg` and `seed` (the rest at the defaults).
inline SamplingParams Sampling(double temperature, double cfg, uint64_t seed) {
  SamplingParams s;
  s.temperature = temperature;
  s.cfg_scale = cfg;
  s.seed = seed;
  return s;
}

StatusOr<DecodeResult> RunMethod(const DecodingMethod& method, const SdFixture& f,
                                 const SamplingParams& sampling);

// AR's exact distribution of tokens 1 and 2 (marginals), by enumerating the target.
std::pair<std::vector<double>, std::vector<double>> ExactMarginals(const SdFixture& f,
                                                                   const SamplingParams& s);

// Pearson chi-square of observed counts against expected probabilities, bins with an
// expectation under 5 pooled; returns (statistic, degrees of freedom).
std::pair<double, int> ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs,
                                 int n);

// 99.9% quantile of chi-square with df degrees of freedom (Wilson-Hilferty approximation).
double ChiSquareCritical(int df);

struct DistributionCheck {
  double stat1, crit1, stat2, crit2;
};

// `runs` samples of `method` (temperature 1, CFG 2, seeds 100000 + i) against ExactMarginals.
DistributionCheck SampleAndCompare(const SdFixture& f, const DecodingMethod& method, int runs);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_SD_FIXTURE_H_
