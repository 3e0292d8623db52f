// Speculative decoding: greedy tokens equal AR's for every gamma, a self-drafting chain accepts
// everything, gamma is validated; also the acceptance rule and LANTERN pooling alone. The
// chi-square tests against AR's exact distribution are in speculative_distribution_test.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/decode/ar.h"
#include "engine/decode/speculative.h"
#include "engine/sampling/guidance.h"
#include "engine/sampling/latent_neighbors.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_acceptance.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::SampleAndCompare;
using testing::SdFixture;


TEST(SpeculativeTest, GreedyEqualsArGreedyForEveryGamma) {
  SdFixture f = LoadSd();
  SamplingParams greedy;
  greedy.temperature = 0.0;
  for (double cfg : {1.0, 4.0}) {
    greedy.cfg_scale = cfg;
    auto ar = RunMethod(ArDecoder(), f, greedy);
    ASSERT_OK(ar);
    for (int64_t gamma : {1, 2, 3, 5, 16}) {
      auto sd = RunMethod(SpeculativeDecoder({gamma}), f, greedy);
      ASSERT_OK(sd);
      EXPECT_EQ(sd->tokens, ar->tokens) << "gamma " << gamma << " cfg " << cfg;
      EXPECT_EQ(sd->stats.tokens, 16);
      EXPECT_LE(sd->stats.target_forward_passes, ar->stats.target_forward_passes);
      // Every verify step ends in one rejection or in a fully accepted draft.
      EXPECT_LE(sd->stats.resampled_tokens, sd->stats.verify_steps);
      EXPECT_GE(sd->stats.drafted_tokens, sd->stats.accepted_tokens);
    }
  }
}

TEST(SpeculativeTest, SelfDraftingAcceptsEverything) {
  SdFixture f = LoadSd();
  f.models.chain = f.models.target;
  SamplingParams sampling;
  sampling.seed = 3;
  auto sd = RunMethod(SpeculativeDecoder({4}), f, sampling);
  ASSERT_OK(sd);
  EXPECT_EQ(sd->stats.accepted_tokens, sd->stats.drafted_tokens);
  EXPECT_EQ(sd->stats.resampled_tokens, 0);
  // 1 prefill + ceil(15 / 5) verify steps (4 drafts + 1 bonus each).
  EXPECT_EQ(sd->stats.target_forward_passes, 4);
  // Greedy with every draft accepted: bonus tokens too must be AR's.
  sampling.temperature = 0.0;
  auto greedy_sd = RunMethod(SpeculativeDecoder({4}), f, sampling);
  auto greedy_ar = RunMethod(ArDecoder(), f, sampling);
  ASSERT_OK(greedy_sd);
  ASSERT_OK(greedy_ar);
  EXPECT_EQ(greedy_sd->tokens, greedy_ar->tokens);
  EXPECT_EQ(greedy_sd->stats.accepted_tokens, greedy_sd->stats.drafted_tokens);
}

TEST(SpeculativeTest, GammaIsValidated) {
  SdFixture f = LoadSd();
  auto r = RunMethod(SpeculativeDecoder({0}), f, SamplingParams());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("speculative.gamma"), std::string::npos);
  f.models.chain = nullptr;
  EXPECT_EQ(RunMethod(SpeculativeDecoder(), f, SamplingParams()).status().code(),
            StatusCode::kFailedPrecondition);
}

// The acceptance rule alone: drafts from q, kept with min(1, p/q), else replaced from the
// residual, end up distributed as p.
TEST(SpeculativeAcceptanceTest, OutputIsDistributedAsP) {
  auto p = torch::tensor({0.05f, 0.4f, 0.1f, 0.3f, 0.15f});
  auto q = torch::tensor({0.3f, 0.1f, 0.3f, 0.1f, 0.2f});
  Rng draft(1), accept(2), resample(3);
  const int n = 100000;
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) {
    const int64_t x = SampleFromProbabilities(q, draft);
    if (AcceptDraft(p[x].item<double>(), q[x].item<double>(), accept)) {
      counts[x]++;
    } else {
      counts[SampleFromProbabilities(ResidualDistribution(p, q), resample)]++;
    }
  }
  std::vector<double> pv(p.data_ptr<float>(), p.data_ptr<float>() + 5);
  auto [stat, df] = ChiSquare(counts, pv, n);
  EXPECT_LT(stat, ChiSquareCritical(df));
}

TEST(SpeculativeAcceptanceTest, ResidualIsNormalisedPositivePart) {
  auto r = ResidualDistribution(torch::tensor({0.5f, 0.3f, 0.2f}), torch::tensor({0.2f, 0.5f, 0.3f}));
  EXPECT_NEAR(r[0].item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(r[1].item<float>(), 0.0f);
  auto same = ResidualDistribution(torch::tensor({0.5f, 0.5f}), torch::tensor({0.5f, 0.5f}));
  EXPECT_NEAR(same[0].item<float>(), 0.5f, 1e-6);  // p == q: falls back to p
}

TEST(LatentNeighborsTest, OrderedByDistanceWithoutSelf) {
  // Points on a line at 0, 1, 3, 7: neighbours of 0 are 1, 3, 7; of 3 are 1, 0, 7 (1 < 3).
  auto book = torch::tensor({0.0f, 1.0f, 3.0f, 7.0f}).view({4, 1});
  auto table = LatentNeighbors::Build(book, 10).table();
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(table[0][0].item<int64_t>(), 1);
  EXPECT_EQ(table[0][1].item<int64_t>(), 2);
  EXPECT_EQ(table[0][2].item<int64_t>(), 3);
  EXPECT_EQ(table[2][0].item<int64_t>(), 1);
  EXPECT_EQ(table[2][1].item<int64_t>(), 0);
  EXPECT_EQ(LatentNeighbors::Build(book, 2).max_neighbors(), 2);
}

}  // namespace
}  // namespace mulo::engine
