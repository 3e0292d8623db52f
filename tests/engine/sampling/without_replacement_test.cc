// Siblings drawn without replacement: distinct tokens, row i of q is q without the earlier
// draws renormalised, the first draw follows q and the second follows q given the first;
// greedy takes the most likely tokens in order; a q with fewer positive entries than asked
// yields fewer draws.
#include "engine/sampling/without_replacement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mulo::engine {
namespace {

TEST(WithoutReplacementTest, RowsAreTheRemainingMassAndDrawsFollowThem) {
  const auto q = torch::tensor({0.1f, 0.4f, 0.2f, 0.3f});
  Rng rng(9);
  std::vector<int> first(4, 0), second_after_1(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const SiblingDraws d = DrawWithoutReplacement(q, 3, rng, false);
    ASSERT_EQ(d.tokens.size(), 3u);
    EXPECT_NE(d.tokens[0], d.tokens[1]);
    EXPECT_NE(d.tokens[1], d.tokens[2]);
    EXPECT_NE(d.tokens[0], d.tokens[2]);
    if (i == 0) {
      EXPECT_TRUE(torch::allclose(d.q[0], q));
      auto expected = q.clone();
      expected[d.tokens[0]] = 0;
      EXPECT_TRUE(torch::allclose(d.q[1], expected / expected.sum()));
    }
    ++first[d.tokens[0]];
    if (d.tokens[0] == 1) ++second_after_1[d.tokens[1]];
  }
  // Within 5 standard errors of q, and of q given token 1 first (0.1, 0, 0.2, 0.3) / 0.6.
  for (int t = 0; t < 4; ++t) {
    const double p = q[t].item<double>();
    EXPECT_NEAR(first[t] / double(n), p, 5 * std::sqrt(p * (1 - p) / n)) << t;
  }
  const double m = first[1];
  const std::vector<double> given = {0.1 / 0.6, 0.0, 0.2 / 0.6, 0.3 / 0.6};
  for (int t = 0; t < 4; ++t) {
    EXPECT_NEAR(second_after_1[t] / m, given[t], 5 * std::sqrt(0.25 / m) + 1e-9) << t;
  }
}

TEST(WithoutReplacementTest, GreedyTakesTheLikeliestInOrderAndStopsAtZeroMass) {
  Rng rng(1);
  const SiblingDraws d = DrawWithoutReplacement(torch::tensor({0.1f, 0.6f, 0.0f, 0.3f}), 4, rng,
                                                true);
  EXPECT_EQ(d.tokens, (std::vector<int64_t>{1, 3, 0}));  // token 2 has no mass
  ASSERT_EQ(d.q.size(0), 3);
  EXPECT_EQ(d.q[1][3].item<float>(), 1.0f);
}

}  // namespace
}  // namespace mulo::engine
