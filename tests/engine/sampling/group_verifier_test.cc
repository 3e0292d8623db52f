// GSD's group G(x): the tokens ranked next to x by the target (size / 2 less likely,
// size - 1 - size / 2 more likely), kept when their probability is within the gap of p(x) and
// their embedding within the squared distance of x's; acceptance min(1, p(G) / q(G)); size 1
// is the exact rule, draw for draw.
#include "engine/sampling/group_verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/sampling/uniform_cache.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

// p over 8 tokens, most likely first: 3 (.30), 1 (.20), 5 (.15), 0 (.12), 7 (.10), 2 (.07),
// 6 (.04), 4 (.02).
torch::Tensor P() {
  return torch::tensor({0.12f, 0.20f, 0.07f, 0.30f, 0.02f, 0.15f, 0.04f, 0.10f});
}

// Embeddings on a line: token t at t, so the squared distance of t and u is (t - u)^2.
torch::Tensor Line() { return torch::arange(8, torch::kFloat32).view({8, 1}); }

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(GroupVerifierTest, GroupIsTheRankWindowFilteredByGapAndDistance) {
  const auto p = P();
  // size 5 around token 0 (rank 3): 2 less likely (7, 2), 2 more likely (1, 5).
  GroupVerifier wide({5, 1.0, 1e9}, Line());
  EXPECT_EQ(Sorted(wide.Group(p, 0)), (std::vector<int64_t>{0, 1, 2, 5, 7}));
  EXPECT_EQ(wide.Group(p, 0).front(), 0);
  // size 4: 2 less likely, 1 more likely.
  GroupVerifier four({4, 1.0, 1e9}, Line());
  EXPECT_EQ(Sorted(four.Group(p, 0)), (std::vector<int64_t>{0, 2, 5, 7}));
  // The gap: |p(y) - p(0)| < 0.045 keeps 7 (.02) and 5 (.03), not 2 (.05) or 1 (.08).
  GroupVerifier gap({5, 0.045, 1e9}, Line());
  EXPECT_EQ(Sorted(gap.Group(p, 0)), (std::vector<int64_t>{0, 5, 7}));
  // The distance: (y - 0)^2 < 5 keeps 1 and 2 only.
  GroupVerifier near({5, 1.0, 5.0}, Line());
  EXPECT_EQ(Sorted(near.Group(p, 0)), (std::vector<int64_t>{0, 1, 2}));
  // At the top of the order the window is cut short: token 3 has nothing more likely.
  EXPECT_EQ(Sorted(wide.Group(p, 3)), (std::vector<int64_t>{1, 3, 5}));
  GroupVerifier single({1, 1.0, 1e9}, Line());
  EXPECT_EQ(single.Group(p, 4), (std::vector<int64_t>{4}));
}

TEST(GroupVerifierTest, KeepsWithTheGroupsMassRatio) {
  // Draft 6 from a one-hot q: alone it survives with p(6) = .04; its group {6, 2, 4} (size 3,
  // everything close) with p(G) = .13. Over many uniforms the keep rates match.
  const auto p = P().unsqueeze(0);
  DraftBatch drafts{{6}, {-1}, torch::zeros({1, 8}).index_fill_(1, torch::tensor({6}), 1.0)};
  GroupVerifier grouped({3, 1.0, 1e9}, Line());
  ExactVerifier exact;
  Rng accept_g(1, RngStream::kAcceptance), draw_g(1);
  Rng accept_e(1, RngStream::kAcceptance), draw_e(1);
  // The streams' numbers a block at a time, as a session hands them to its verifiers.
  UniformCache numbers_ag(&accept_g, torch::kCPU), numbers_dg(&draw_g, torch::kCPU);
  UniformCache numbers_ae(&accept_e, torch::kCPU), numbers_de(&draw_e, torch::kCPU);
  int kept_g = 0, kept_e = 0, relaxed = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto g = grouped.Verify({drafts, p, false}, {&accept_g, &draw_g, &numbers_ag, &numbers_dg});
    auto e = exact.Verify({drafts, p, false}, {&accept_e, &draw_e, &numbers_ae, &numbers_de});
    ASSERT_OK(g);
    ASSERT_OK(e);
    kept_g += !g->accepted.empty();
    kept_e += !e->accepted.empty();
    relaxed += g->relaxed_accepts();
    EXPECT_EQ(g->pooled_drafts, 1);
    EXPECT_EQ(g->pooled_neighbors, 2);
    if (g->accepted.empty()) {
      EXPECT_NE(g->next_token, 6);  // the residual excludes x
    }
  }
  EXPECT_NEAR(kept_g / static_cast<double>(n), 0.13, 0.01);
  EXPECT_NEAR(kept_e / static_cast<double>(n), 0.04, 0.006);
  EXPECT_NEAR(relaxed / static_cast<double>(n), 0.09, 0.01);
}

TEST(GroupVerifierTest, SizeOneIsTheExactRuleDrawForDraw) {
  auto p = torch::softmax(torch::randn({6, 8}, torch::TensorOptions().dtype(torch::kFloat32)), 1);
  auto q = torch::softmax(torch::randn({5, 8}), 1);
  DraftBatch drafts{{1, 4, 2, 7, 0}, DraftBatch::ChainParents(5), q};
  GroupVerifier single({1, 0.15, 0.5}, Line());
  ExactVerifier exact;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng a1(seed, RngStream::kAcceptance), d1(seed), a2(seed, RngStream::kAcceptance), d2(seed);
    auto g = single.Verify({drafts, p, false}, {&a1, &d1});
    auto e = exact.Verify({drafts, p, false}, {&a2, &d2});
    ASSERT_OK(g);
    ASSERT_OK(e);
    EXPECT_EQ(g->accepted, e->accepted);
    EXPECT_EQ(g->next_token, e->next_token);
  }
}

// The device path (Verify: the groups' masses as tensor ops, judged by JudgeChains) makes the
// host loop's decisions (VerifyOnHost, the oracle) and counts, and leaves the random streams
// where the host loop leaves them, over random chains whose groups pool 0 to several tokens.
TEST(GroupVerifierTest, TheDevicePathMakesTheHostLoopsDecisions) {
  constexpr int64_t kVocab = 24;
  int64_t pooled_neighbors = 0, relaxed = 0, rejections = 0, whole_chains = 0;
  for (const int64_t size : {1, 3, 14, 40}) {
    for (const double gap : {0.05, 0.15, 1.0}) {
      at::manual_seed(size * 100 + static_cast<int64_t>(gap * 100));
      // Embeddings on a line with small steps: the distance bound keeps neighbours in id.
      const torch::Tensor embeddings = torch::randn({kVocab, 3}) * 0.4;
      const GroupVerifier verifier({size, gap, 0.5}, embeddings);
      for (int64_t seed = 0; seed < 12; ++seed) {
        const int64_t length = 1 + seed % 6;
        const bool bonus = seed % 2 == 0;
        const torch::Tensor q = torch::softmax(torch::randn({length, kVocab}) * 1.5, 1);
        torch::Tensor p = torch::softmax(torch::randn({length + (bonus ? 1 : 0), kVocab}) * 1.5, 1);
        p.narrow(0, 0, length).mul_(0.5).add_(q * 0.5);  // long kept stretches too
        if (seed % 3 == 0) {  // a top-k-filtered target: many exact ties at 0, broken by id
          p.masked_fill_(p.lt(std::get<0>(p.kthvalue(kVocab - 6, 1, true))), 0.0);
          p.div_(p.sum(1, true));
        }
        const torch::Tensor ids = torch::multinomial(q, 1).squeeze(1);
        const DraftBatch drafts{std::vector<int64_t>(ids.data_ptr<int64_t>(),
                                                     ids.data_ptr<int64_t>() + length),
                                DraftBatch::ChainParents(length), q};
        const VerifyInput input{drafts, p, false};
        Rng host_accept(seed, RngStream::kAcceptance), host_draw(seed, RngStream::kTarget);
        Rng device_accept(seed, RngStream::kAcceptance), device_draw(seed, RngStream::kTarget);
        auto host = verifier.VerifyOnHost(input, {&host_accept, &host_draw});
        auto device = verifier.Verify(input, {&device_accept, &device_draw});
        ASSERT_OK(host);
        ASSERT_OK(device);
        const std::string where = "size " + std::to_string(size) + " gap " +
                                  std::to_string(gap) + " seed " + std::to_string(seed);
        EXPECT_EQ(device->accepted, host->accepted) << where;
        EXPECT_EQ(device->next_token, host->next_token) << where;
        EXPECT_EQ(device->relaxed, host->relaxed) << where;
        EXPECT_EQ(device->pooled_drafts, host->pooled_drafts) << where;
        EXPECT_EQ(device->pooled_neighbors, host->pooled_neighbors) << where;
        EXPECT_EQ(device_accept.index(), host_accept.index()) << where;
        EXPECT_EQ(device_draw.index(), host_draw.index()) << where;
        pooled_neighbors += host->pooled_neighbors;
        relaxed += host->relaxed_accepts();
        rejections += static_cast<int64_t>(host->accepted.size()) < length;
        whole_chains += static_cast<int64_t>(host->accepted.size()) == length;
      }
    }
  }
  // The trials met groups, relaxed keeps, rejections and whole chains.
  EXPECT_GE(pooled_neighbors, 50);
  EXPECT_GE(relaxed, 5);
  EXPECT_GE(rejections, 20);
  EXPECT_GE(whole_chains, 10);
}

}  // namespace
}  // namespace mulo::engine
