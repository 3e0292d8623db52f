// The verifier rules on their own: the exact rule keeps a chain's prefix and its output is
// distributed as p (a broken rule fails the same test), greedy verification is argmax
// agreement; the pooled threshold judges every position on its own and reduces to p(x) >= tau
// without pooling.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/pooled_threshold_verifier.h"
#include "engine/sampling/sampler.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

DraftBatch Chain(const std::vector<int64_t>& tokens, const torch::Tensor& q) {
  DraftBatch d;
  d.tokens = tokens;
  d.parents = DraftBatch::ChainParents(static_cast<int64_t>(tokens.size()));
  d.q = q;
  return d;
}

// 99.9% quantile of chi-square (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

double ChiSquare(const std::vector<int>& counts, const torch::Tensor& p, int n) {
  double stat = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * p[i].item<double>();
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

// Draws one draft from q, verifies it against p with `verifier`, and counts the output token.
double OneTokenChiSquare(const Verifier& verifier, int n) {
  const auto p = torch::tensor({0.05f, 0.4f, 0.1f, 0.3f, 0.15f});
  const auto q = torch::tensor({0.3f, 0.1f, 0.3f, 0.1f, 0.2f});
  Rng draft(1), accept(2), draw(3);
  // The streams' numbers for the device path, a block at a time, as a request passes them.
  UniformCache accept_numbers(&accept, torch::kCPU), draw_numbers(&draw, torch::kCPU);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) {
    const int64_t x = SampleFromProbabilities(q, draft);
    DraftBatch drafts = Chain({x}, q.unsqueeze(0));
    auto verdict = verifier.Verify({drafts, p.unsqueeze(0), false},
                                   {&accept, &draw, &accept_numbers, &draw_numbers});
    EXPECT_TRUE(verdict.ok());
    counts[verdict->accepted.empty() ? verdict->next_token : x]++;
  }
  return ChiSquare(counts, p, n);
}

TEST(ExactVerifierTest, OutputIsDistributedAsPAndABrokenRuleIsCaught) {
  const double critical = ChiSquareCritical(4);
  const double exact = OneTokenChiSquare(ExactVerifier(), 50000);
  EXPECT_LT(exact, critical);
  const double broken = OneTokenChiSquare(
      ExactVerifier([](double, double, Rng& rng) {
        rng.Uniform();
        return true;  // keeps every draft: the output follows q
      }),
      50000);
  EXPECT_GT(broken, critical);
}

TEST(ExactVerifierTest, GreedyKeepsTheAgreeingPrefixThenTheTargetsChoice) {
  // One-hot p and q as at temperature 0: drafts 0 and 1 agree, draft 2 does not.
  const auto p = torch::one_hot(torch::tensor({1, 2, 0, 3}), 4).to(torch::kFloat32);
  const auto q = torch::one_hot(torch::tensor({1, 2, 3}), 4).to(torch::kFloat32);
  Rng accept(1), draw(2);
  auto verdict = ExactVerifier().Verify({Chain({1, 2, 3}, q), p, true}, {&accept, &draw});
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(verdict->accepted, std::vector<int64_t>({0, 1}));
  EXPECT_EQ(verdict->next_token, 0);  // the target's argmax where the chain broke
  // All kept: the bonus row's argmax follows.
  auto all = ExactVerifier().Verify({Chain({1, 2, 0}, p.narrow(0, 0, 3)), p, true},
                                    {&accept, &draw});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->accepted.size(), 3u);
  EXPECT_EQ(all->next_token, 3);
  // Without a bonus row nothing follows a fully kept chain.
  auto no_bonus = ExactVerifier().Verify({Chain({1, 2, 0}, p.narrow(0, 0, 3)),
                                          p.narrow(0, 0, 3), true},
                                         {&accept, &draw});
  ASSERT_TRUE(no_bonus.ok());
  EXPECT_EQ(no_bonus->next_token, -1);
}

TEST(ExactVerifierTest, RefusesTreesAndMissingQ) {
  const auto p = torch::full({2, 3}, 1.0f / 3);
  Rng accept(1), draw(2);
  DraftBatch tree = Chain({0, 1}, p);
  tree.parents = {-1, -1};
  EXPECT_EQ(ExactVerifier().Verify({tree, p, false}, {&accept, &draw}).status().code(),
            StatusCode::kInvalidArgument);
  DraftBatch no_q = Chain({0, 1}, torch::Tensor());
  EXPECT_EQ(ExactVerifier().Verify({no_q, p, false}, {&accept, &draw}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PooledThresholdVerifierTest, JudgesEveryPositionOnItsOwn) {
  // A 4-entry codebook on a line: neighbours of 0 are 1, 2, 3 in that order, and so on.
  auto codebook = torch::tensor({{0.0f}, {1.0f}, {2.0f}, {3.0f}});
  const LatentNeighbors neighbors = LatentNeighbors::Build(codebook, 3);
  const auto p = torch::tensor({{0.05f, 0.05f, 0.1f, 0.8f},    // x = 0: 0.05 alone
                                {0.7f, 0.2f, 0.05f, 0.05f},    // x = 1: 0.2 alone
                                {0.0f, 0.02f, 0.03f, 0.95f}}); // x = 2: 0.03 alone
  DraftBatch drafts;
  drafts.tokens = {0, 1, 2};
  drafts.parents = {-1, -1, -1};
  PoolingRule none, additive;
  none.kind = Pooling::kNone;
  additive.k = 3;
  additive.delta = 0.1;
  // No pooling: accepted exactly where p(x) >= tau; positions are independent.
  auto plain = PooledThresholdVerifier(0.1, none, neighbors).Verify({drafts, p}, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->accepted, std::vector<int64_t>({1}));
  EXPECT_EQ(plain->rejected, std::vector<int64_t>({0, 2}));
  EXPECT_EQ(plain->next_token, -1);
  EXPECT_EQ(plain->relaxed_accepts(), 0);
  // Pooling the nearest neighbours while their summed mass stays within delta lifts position
  // 0 (0.05 + p(1) = 0.1) but not position 2 (0.03 + p(1) = 0.05; adding p(3) would pass
  // delta).
  auto pooled = PooledThresholdVerifier(0.1, additive, neighbors).Verify({drafts, p}, {});
  ASSERT_TRUE(pooled.ok());
  EXPECT_EQ(pooled->accepted, std::vector<int64_t>({0, 1}));
  EXPECT_EQ(pooled->relaxed, std::vector<int64_t>{0});  // position 0, below tau on its own
  // The limits: tau 0 keeps everything, tau above 1 nothing.
  EXPECT_EQ(PooledThresholdVerifier(0, additive, neighbors).Verify({drafts, p}, {})->accepted.size(),
            3u);
  EXPECT_EQ(PooledThresholdVerifier(1.5, additive, neighbors).Verify({drafts, p}, {})->rejected.size(),
            3u);
}

}  // namespace
}  // namespace mulo::engine
