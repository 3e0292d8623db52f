// Latent pooling (pooling.h): the additive bound (LANTERN), the multiplicative bound
// (LANTERN++), none, and the reductions: k 0, delta 0 (with positive neighbours), lambda 1 and
// kNone all pool nothing.
#include "engine/sampling/pooling.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mulo::engine {
namespace {

PoolingRule Rule(Pooling kind, int64_t k, double delta = 0.1, double lambda = 2.0) {
  PoolingRule rule;
  rule.kind = kind;
  rule.k = k;
  rule.delta = delta;
  rule.lambda = lambda;
  return rule;
}

float Pooled(const torch::Tensor& probs, int64_t token, const LatentNeighbors& n,
             const PoolingRule& rule) {
  return PooledProbability(probs, torch::tensor({token}, torch::kInt64), n, rule)[0]
      .item<float>();
}

struct LineFixture {
  // A 4-entry codebook on a line: the neighbours of 0 are 1, 2, 3 in that order.
  LatentNeighbors n = LatentNeighbors::Build(torch::tensor({0.0f, 1.0f, 3.0f, 7.0f}).view({4, 1}), 3);
  // Target probabilities of tokens 0..3 at one position; prefix sums of 0's neighbours are
  // 0.05, 0.35, 0.9.
  torch::Tensor probs = torch::tensor({0.1f, 0.05f, 0.3f, 0.55f}).view({1, 4});
};

TEST(PoolingTest, AdditiveKeepsTheLongestNeighbourPrefixWithinDelta) {
  LineFixture f;
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 3, 0.1)), 0.15f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 3, 0.4)), 0.45f, 1e-6);
  // k counts the neighbours: k 1 considers neighbour 1 only.
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 1, 0.4)), 0.15f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 3, 0.01)), 0.1f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 3, 1.0)), 1.0f, 1e-6);
  // k above the table is capped.
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kAdditive, 1000, 1.0)), 1.0f, 1e-6);
  EXPECT_EQ(PooledNeighborCount(f.probs, torch::tensor({0}, torch::kInt64), f.n,
                                Rule(Pooling::kAdditive, 3, 0.4))[0]
                .item<int64_t>(),
            2);
}

TEST(PoolingTest, MultiplicativeBoundsThePooledMassByLambdaTimesOwn) {
  LineFixture f;
  // p(0) = 0.1: lambda 1.4 allows 0.04 (nothing), 1.6 allows 0.06 (neighbour 1), 4 allows 0.3
  // (not 0.35), 5 allows 0.4 (neighbours 1 and 2).
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kMultiplicative, 3, 0.1, 1.4)), 0.1f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kMultiplicative, 3, 0.1, 1.6)), 0.15f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kMultiplicative, 3, 0.1, 4.0)), 0.15f, 1e-6);
  EXPECT_NEAR(Pooled(f.probs, 0, f.n, Rule(Pooling::kMultiplicative, 3, 0.1, 5.0)), 0.45f, 1e-6);
  // A token the target finds unlikely borrows little whatever lambda: the mode's mass is never
  // lent to a tail token (the additive rule lends up to delta to any token).
  auto tail = torch::tensor({0.001f, 0.5f, 0.3f, 0.199f}).view({1, 4});
  EXPECT_NEAR(Pooled(tail, 0, f.n, Rule(Pooling::kMultiplicative, 3, 0.1, 100.0)), 0.001f, 1e-6);
  EXPECT_NEAR(Pooled(tail, 0, f.n, Rule(Pooling::kAdditive, 3, 0.6)), 0.501f, 1e-6);
}

TEST(PoolingTest, EveryNoPoolingFormIsTheOwnProbability) {
  at::manual_seed(0);
  auto table = LatentNeighbors::Build(torch::randn({64, 8}), 63);
  auto p = torch::softmax(torch::randn({32, 64}) * 3, -1);
  auto tokens = torch::randint(64, {32}, torch::kInt64);
  auto own = p.gather(1, tokens.view({-1, 1})).squeeze(1);
  for (const PoolingRule& rule :
       {Rule(Pooling::kNone, 63), Rule(Pooling::kAdditive, 0, 0.5),
        Rule(Pooling::kMultiplicative, 63, 0.1, 1.0), Rule(Pooling::kMultiplicative, 0, 0.1, 9)}) {
    EXPECT_TRUE(torch::equal(PooledProbability(p, tokens, table, rule), own))
        << PoolingName(rule.kind) << " k " << rule.k << " lambda " << rule.lambda;
  }
  // The bounds hold on random inputs.
  for (double delta : {0.0, 0.05, 0.1, 0.3}) {
    auto pooled = PooledProbability(p, tokens, table, Rule(Pooling::kAdditive, 63, delta));
    EXPECT_LE((pooled - own).max().item<float>(), delta + 1e-6);
    EXPECT_GE((pooled - own).min().item<float>(), -1e-6);
  }
  for (double lambda : {1.5, 3.0}) {
    auto pooled = PooledProbability(p, tokens, table, Rule(Pooling::kMultiplicative, 63, 0, lambda));
    EXPECT_TRUE(torch::all(pooled <= own * lambda + 1e-6).item<bool>());
  }
}

TEST(PoolingTest, NamesParseAndRangesAreChecked) {
  for (Pooling p : {Pooling::kAdditive, Pooling::kMultiplicative, Pooling::kNone}) {
    auto parsed = ParsePooling(PoolingName(p), "mulo.pooling");
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParsePooling("sum", "mulo.pooling");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("mulo.pooling"), std::string::npos);
  EXPECT_TRUE(PoolingRule().Validate("mulo").ok());
  auto field = [](const PoolingRule& rule) { return rule.Validate("mulo").message(); };
  EXPECT_EQ(field(Rule(Pooling::kAdditive, -1)).rfind("mulo.k:", 0), 0u);
  EXPECT_EQ(field(Rule(Pooling::kAdditive, 3, 1.5)).rfind("mulo.delta:", 0), 0u);
  EXPECT_EQ(field(Rule(Pooling::kAdditive, 3, 0.1, 0.5)).rfind("mulo.lambda:", 0), 0u);
  EXPECT_EQ(field(Rule(Pooling::kAdditive, 3, 0.1, std::nan(""))).rfind("mulo.lambda:", 0), 0u);
}

}  // namespace
}  // namespace mulo::engine
