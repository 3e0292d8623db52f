// The latent relaxation of tree verification (LANTERN, LANTERN++): a draft is kept with
// min(1, p~/q) and a rejection after pooling takes the neighbourhood out. Checked against the
// exact output distribution, computed here independently of pooling.cc (a five-entry codebook
// on a line, its neighbour order written out by hand); the lossless rule fails the same test;
// delta 0 / lambda 1 decide exactly as the lossless verifier; greedy relaxed keeps the longest
// kept path.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/sampling/sampler.h"
#include "engine/sampling/tree_verifier.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// Entries sit at 0, 8, 1, 4, 2 on a line, so by distance (ties by index):
//   0: 2 4 3 1    1: 3 4 2 0    2: 0 4 3 1    3: 4 2 0 1    4: 2 0 3 1
const std::vector<std::vector<int64_t>> kOrder = {
    {2, 4, 3, 1}, {3, 4, 2, 0}, {0, 4, 3, 1}, {4, 2, 0, 1}, {2, 0, 3, 1}};
const std::vector<double> kP = {0.05, 0.4, 0.1, 0.3, 0.15};
const std::vector<double> kQ = {0.3, 0.1, 0.3, 0.1, 0.2};

std::shared_ptr<const LatentNeighbors> Neighbours() {
  return std::make_shared<LatentNeighbors>(
      LatentNeighbors::Build(torch::tensor({0.0f, 8.0f, 1.0f, 4.0f, 2.0f}).view({5, 1}), 4));
}

torch::Tensor Row(const std::vector<double>& v) { return torch::tensor(v, torch::kFloat64); }

// The pooled mass c_m, written out: the longest prefix of x's neighbours within the bound.
double Borrowed(const std::vector<double>& p, int64_t x, const PoolingRule& rule) {
  const double bound = rule.kind == Pooling::kAdditive ? rule.delta : (rule.lambda - 1) * p[x];
  double sum = 0, kept = 0;
  for (int64_t m = 0; m < rule.k && m < 4; ++m) {
    sum += p[kOrder[x][m]];
    if (sum <= bound) kept = sum;
  }
  return kept;
}

// Expected distribution of the first committed token of a one-child tree whose child is drawn
// from q (static, q defined) or is always `fixed` (deterministic, q = 1).
std::vector<double> Expected(const PoolingRule& rule, bool static_tree, int64_t fixed) {
  std::vector<double> out(5, 0.0);
  for (int64_t x = 0; x < 5; ++x) {
    const double weight = static_tree ? kQ[x] : (x == fixed ? 1.0 : 0.0);
    if (weight == 0) continue;
    const double borrowed = Borrowed(kP, x, rule);
    const double q_x = static_tree ? kQ[x] : 1.0;
    const double accept = std::min(1.0, (kP[x] + borrowed) / q_x);
    std::vector<double> residual(5);
    std::vector<double> taken = static_tree ? kQ : std::vector<double>(5, 0.0);
    if (!static_tree) taken[x] = 1.0;
    std::vector<bool> out_of_play(5, false);
    if (borrowed > 0) {
      for (int64_t m = 0; m < rule.k + 1 && m < 4; ++m) out_of_play[kOrder[x][m]] = true;
    }
    double total = 0;
    for (int64_t y = 0; y < 5; ++y) {
      if (static_tree) {
        residual[y] = std::max(kP[y] - (out_of_play[y] ? 0.0 : taken[y]), 0.0);
      } else {
        residual[y] = (y == x || out_of_play[y]) ? 0.0 : kP[y];
      }
      total += residual[y];
    }
    out[x] += weight * accept;
    for (int64_t y = 0; y < 5; ++y) out[y] += weight * (1 - accept) * residual[y] / total;
  }
  return out;
}

// Counts of the first committed token over n verifications of a one-child tree.
std::vector<int> Sample(const TreeVerifier& verifier, bool static_tree, int64_t fixed, int n) {
  Rng draft(11), accept(12), draw(13);
  std::vector<int> counts(5, 0);
  const auto p = torch::stack({Row(kP), Row(kP)});  // after the child (unused), the root
  for (int i = 0; i < n; ++i) {
    DraftBatch d;
    d.parents = {-1};
    if (static_tree) {
      d.tokens = {SampleFromProbabilities(Row(kQ), draft)};
      d.q = Row(kQ).unsqueeze(0);
    } else {
      d.tokens = {fixed};
    }
    auto v = verifier.Verify({d, p, false}, {&accept, &draw});
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    counts[v->accepted.empty() ? v->next_token : d.tokens[0]]++;
  }
  return counts;
}

// Pearson chi-square over the cells with a positive expectation; cells expected empty must
// stay empty (returns infinity otherwise).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected, int n,
                 int* df) {
  double stat = 0;
  *df = -1;
  for (size_t y = 0; y < counts.size(); ++y) {
    if (expected[y] <= 0) {
      if (counts[y] > 0) return INFINITY;
      continue;
    }
    const double e = n * expected[y];
    stat += (counts[y] - e) * (counts[y] - e) / e;
    ++*df;
  }
  return stat;
}

double Critical(int df) {  // 99.9% quantile (Wilson-Hilferty)
  const double z = 3.090, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

TEST(RelaxedTreeVerifierTest, DeterministicTreeKeepsWithPooledMassAndDropsTheNeighbourhood) {
  // Token 0 (p 0.05): neighbour 2 (0.1) fits delta 0.2, neighbour 4 (0.15) no longer does,
  // so p~ = 0.15; a rejection zeroes 0 and its first k + 1 = 2 neighbours (2 and 4).
  const PoolingRule rule{Pooling::kAdditive, 1, 0.2};
  const auto expected = Expected(rule, /*static_tree=*/false, 0);
  EXPECT_NEAR(expected[0], 0.15, 1e-12);
  EXPECT_EQ(expected[2], 0.0);
  EXPECT_EQ(expected[4], 0.0);
  const int n = 40000;
  int df = 0;
  const double stat =
      ChiSquare(Sample(TreeVerifier({}, {rule, Neighbours()}), false, 0, n), expected, n, &df);
  EXPECT_LT(stat, Critical(df));
  // The lossless rule on the same draws: token 0 at 0.05, tokens 2 and 4 still drawn.
  const double lossless = ChiSquare(Sample(TreeVerifier(), false, 0, n), expected, n, &df);
  EXPECT_GT(lossless, Critical(2));
}

TEST(RelaxedTreeVerifierTest, StaticTreeKeepsWithPooledOverQAndSubtractsQOutsideIt) {
  // LANTERN++: every token pools up to (lambda - 1) p(x) from its 2 nearest neighbours.
  const PoolingRule rule{Pooling::kMultiplicative, 2, 0.0, 4.0};
  const auto expected = Expected(rule, /*static_tree=*/true, -1);
  double total = 0;
  for (double e : expected) total += e;
  EXPECT_NEAR(total, 1.0, 1e-12);
  const int n = 60000;
  int df = 0;
  const double stat =
      ChiSquare(Sample(TreeVerifier({}, {rule, Neighbours()}), true, -1, n), expected, n, &df);
  EXPECT_LT(stat, Critical(df));
  const double lossless = ChiSquare(Sample(TreeVerifier(), true, -1, n), expected, n, &df);
  EXPECT_GT(lossless, Critical(4));
}

TEST(RelaxedTreeVerifierTest, DeltaZeroAndLambdaOneDecideAsTheLosslessRule) {
  const auto neighbours = Neighbours();
  for (const PoolingRule& off :
       {PoolingRule{Pooling::kAdditive, 4, 0.0}, PoolingRule{Pooling::kMultiplicative, 4, 0.0, 1.0},
        PoolingRule{Pooling::kAdditive, 0, 0.5}}) {
    for (bool static_tree : {false, true}) {
      const TreeVerifier relaxed({}, {off, neighbours}), lossless;
      Rng a1(3), d1(4), a2(3), d2(4), draft(5);
      for (int i = 0; i < 2000; ++i) {
        // Two levels: children 0 and 1 of the root, child 2 under draft 0.
        DraftBatch d;
        d.parents = {-1, -1, 0};
        for (int c = 0; c < 3; ++c) d.tokens.push_back(SampleFromProbabilities(Row(kQ), draft));
        if (d.tokens[1] == d.tokens[0]) d.tokens[1] = (d.tokens[0] + 1) % 5;
        if (static_tree) d.q = torch::stack({Row(kQ), Row(kQ), Row(kQ)});
        const auto p = torch::stack({Row(kQ), Row(kP), Row(kP), Row(kP)});
        auto v1 = relaxed.Verify({d, p, false}, {&a1, &d1});
        auto v2 = lossless.Verify({d, p, false}, {&a2, &d2});
        ASSERT_OK(v1);
        ASSERT_OK(v2);
        ASSERT_EQ(v1->accepted, v2->accepted);
        ASSERT_EQ(v1->next_token, v2->next_token);
        EXPECT_EQ(v1->relaxed_accepts(), 0);
      }
    }
  }
}

TEST(RelaxedTreeVerifierTest, GreedyRaisesTheDraftToItsPooledMassAndKeepsTheLongestPath) {
  // Root: argmax is token 1 (0.4). Draft 0 = token 3 (0.3) pools neighbour 4 (0.15) under
  // delta 0.2, p~ = 0.45 beats 0.4; draft 1 = token 1 is the plain argmax. Draft 2 (token 2)
  // under draft 0 is the argmax after it, so draft 0's path is longer and wins.
  DraftBatch d;
  d.tokens = {3, 1, 2};
  d.parents = {-1, -1, 0};
  const auto after_3 = Row({0.1, 0.1, 0.5, 0.2, 0.1});
  const auto p = torch::stack({after_3, Row(kP), Row(kP), Row(kP)});
  Rng a(1), b(2);
  auto relaxed = TreeVerifier({}, {PoolingRule{Pooling::kAdditive, 4, 0.2}, Neighbours()})
                     .Verify({d, p, true}, {&a, &b});
  ASSERT_OK(relaxed);
  EXPECT_EQ(relaxed->accepted, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(relaxed->relaxed_accepts(), 1);
  EXPECT_EQ(relaxed->next_token, 1);  // the argmax after draft 2 (row kP)
  EXPECT_GT(relaxed->pooled_drafts, 0);
  auto lossless = TreeVerifier().Verify({d, p, true}, {&a, &b});
  ASSERT_OK(lossless);
  EXPECT_EQ(lossless->accepted, (std::vector<int64_t>{1}));
  EXPECT_EQ(lossless->next_token, 1);
}

TEST(RelaxedTreeVerifierTest, RefusesARelaxationWithoutAMatchingNeighbourTable) {
  DraftBatch d;
  d.tokens = {1};
  d.parents = {-1};
  Rng a(1), b(2);
  const auto p = torch::stack({Row(kP), Row(kP)});
  EXPECT_EQ(TreeVerifier({}, {PoolingRule{Pooling::kAdditive, 4, 0.1}, nullptr})
                .Verify({d, p, false}, {&a, &b})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto wide = std::make_shared<LatentNeighbors>(LatentNeighbors::Build(torch::randn({7, 2}), 6));
  EXPECT_EQ(TreeVerifier({}, {PoolingRule{Pooling::kAdditive, 4, 0.1}, wide})
                .Verify({d, p, false}, {&a, &b})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mulo::engine
