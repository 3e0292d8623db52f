// The device chain verifier (ExactVerifier::Verify with the default rules, through
// JudgeChains) makes the host loop's decisions (ExactVerifier::VerifyOnHost, the oracle) given
// the same random streams, and leaves the streams where the host loop leaves them; judged in
// one ragged batch, every chain gets its decision alone.
#include "engine/sampling/chain_rejection.h"

#include <gtest/gtest.h>

#include "engine/sampling/chain_judge.h"

#include <map>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/sampling/exact_verifier.h"
#include "engine/sampling/rng.h"

namespace mulo::engine {
namespace {

constexpr int64_t kVocab = 24;

torch::Tensor OneHotRows(const torch::Tensor& ids) {
  return torch::one_hot(ids, kVocab).to(torch::kFloat32);
}

struct Case {
  torch::Tensor p, q;
  std::vector<int64_t> tokens;
};

// Drafts from q; p mixes in q by `closeness` so that chains are kept for long stretches.
Case RandomCase(int64_t length, bool bonus, bool greedy, double closeness, int64_t seed) {
  at::manual_seed(seed);
  const int64_t rows = length + (bonus ? 1 : 0);
  Case c;
  c.q = torch::softmax(torch::randn({length, kVocab}) * 2.0, 1);
  auto own = torch::softmax(torch::randn({rows, kVocab}) * 2.0, 1);
  c.p = own;
  if (length > 0) {
    c.p.narrow(0, 0, length).copy_(closeness * c.q + (1.0 - closeness) * own.narrow(0, 0, length));
  }
  if (greedy) {  // temperature 0: every distribution is the one-hot of its argmax
    c.p = OneHotRows(c.p.argmax(1));
    if (length > 0) c.q = OneHotRows(c.q.argmax(1));
  }
  const torch::Tensor ids = length == 0
                                ? torch::zeros({0}, torch::kInt64)
                                : (greedy ? c.q.argmax(1) : torch::multinomial(c.q, 1).squeeze(1));
  c.tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
  return c;
}

TEST(ChainRejectionTest, TheDeviceVerifierMakesTheHostLoopsDecisions) {
  const ExactVerifier verifier;
  std::map<int64_t, int> kept_lengths;
  int rejections = 0, trials = 0;
  for (int64_t length : {0, 1, 3, 8}) {
    for (bool bonus : {false, true}) {
      if (length == 0 && !bonus) continue;
      for (bool greedy : {false, true}) {
        for (int64_t seed = 0; seed < 30; ++seed) {
          const Case c = RandomCase(length, bonus, greedy, (seed % 4) / 3.0, 100 * length + seed);
          const DraftBatch drafts{c.tokens, DraftBatch::ChainParents(length), c.q};
          const VerifyInput input{drafts, c.p, greedy};
          Rng host_accept(seed, RngStream::kAcceptance), host_draw(seed, RngStream::kTarget);
          Rng device_accept(seed, RngStream::kAcceptance), device_draw(seed, RngStream::kTarget);
          for (int64_t i = 0; i < seed % 5; ++i) {  // mid-stream, as in a running request
            host_accept.Uniform();
            device_accept.Uniform();
            host_draw.Uniform();
            device_draw.Uniform();
          }
          auto host = verifier.VerifyOnHost(input, {&host_accept, &host_draw});
          auto device = verifier.Verify(input, {&device_accept, &device_draw});
          ASSERT_TRUE(host.ok()) << host.status().ToString();
          ASSERT_TRUE(device.ok()) << device.status().ToString();
          const std::string where = "length " + std::to_string(length) + ", bonus " +
                                    std::to_string(bonus) + ", greedy " + std::to_string(greedy) +
                                    ", seed " + std::to_string(seed);
          EXPECT_EQ(device->accepted, host->accepted) << where;
          EXPECT_EQ(device->next_token, host->next_token) << where;
          EXPECT_EQ(device_accept.index(), host_accept.index()) << where;
          EXPECT_EQ(device_draw.index(), host_draw.index()) << where;
          ++kept_lengths[static_cast<int64_t>(host->accepted.size())];
          rejections += static_cast<int64_t>(host->accepted.size()) < length;
          ++trials;
        }
      }
    }
  }
  // The trials met every outcome: a rejection at the first draft, later ones, whole chains.
  EXPECT_GE(kept_lengths[0], 20);
  EXPECT_GE(kept_lengths[8], 5);
  EXPECT_GE(kept_lengths.size(), 7u);
  EXPECT_GE(rejections, trials / 4);
}

TEST(ChainRejectionTest, AVerifyStepReadsTheHostOnce) {
  const Case c = RandomCase(8, true, false, 0.5, 7);
  const DraftBatch drafts{c.tokens, DraftBatch::ChainParents(8), c.q};
  Rng accept(7, RngStream::kAcceptance), draw(7, RngStream::kTarget);
  const int64_t before = HostReadCount();
  ASSERT_TRUE(ExactVerifier().Verify({drafts, c.p, false}, {&accept, &draw}).ok());
  EXPECT_EQ(HostReadCount() - before, 1);
  Rng accept_host(7, RngStream::kAcceptance), draw_host(7, RngStream::kTarget);
  const int64_t host_before = HostReadCount();
  ASSERT_TRUE(ExactVerifier().VerifyOnHost({drafts, c.p, false}, {&accept_host, &draw_host}).ok());
  EXPECT_GE(HostReadCount() - host_before, 2) << "the oracle reads p and q";
}

// One greedy draft x = 3 under p's rows, judged alone: int64 [4].
torch::Tensor JudgeGreedyDraft(const torch::Tensor& p, const torch::Tensor& q) {
  ChainCall call{p, q, torch::tensor({3}, torch::kInt64), torch::tensor({0.5}, torch::kFloat64),
                 torch::tensor({0.25}, torch::kFloat64), /*greedy=*/true};
  return JudgeChains({call})[0];
}

TEST(ChainRejectionTest, ARejectedGreedyDraftIsReplacedByTheTargetsArgmax) {
  // q one-hot at 3, p one-hot at 5: the draft is rejected and the residual is p itself.
  const torch::Tensor q = OneHotRows(torch::tensor({3}, torch::kInt64));
  const torch::Tensor result = JudgeGreedyDraft(OneHotRows(torch::tensor({5, 9})), q);
  EXPECT_EQ(result[0].item<int64_t>(), 0);
  EXPECT_EQ(result[1].item<int64_t>(), 5);
  // Kept instead (p = q): the greedy bonus is the last row's argmax.
  const torch::Tensor kept = JudgeGreedyDraft(OneHotRows(torch::tensor({3, 9})), q);
  EXPECT_EQ(kept[0].item<int64_t>(), 1);
  EXPECT_EQ(kept[1].item<int64_t>(), 9);
}

// A chain of `length` drafts with its own numbers; every third one judged by random pooled
// masses (as GSD's groups are), between its own masses and 1.
ChainCall RandomCall(int64_t length, bool bonus, bool greedy, int64_t seed) {
  const Case c = RandomCase(length, bonus, greedy, (seed % 4) / 3.0, seed);
  ChainCall call{c.p, c.q, torch::tensor(c.tokens, torch::kInt64),
                 torch::rand({length}, torch::kFloat64), torch::rand({1}, torch::kFloat64),
                 greedy};
  if (seed % 3 == 0 && length > 0) {
    const torch::Tensor ids = call.tokens.view({length, 1});
    const torch::Tensor p_x =
        c.p.narrow(0, 0, length).gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor q_x = c.q.gather(1, ids).squeeze(1).to(torch::kFloat64);
    const torch::Tensor lift = torch::rand({length}, torch::kFloat64);
    call.pooled = PooledMasses{p_x + (1.0 - p_x) * lift, q_x + (1.0 - q_x) * lift * 0.5,
                               torch::randint(0, 5, {length}, torch::kInt64)};
  }
  return call;
}

std::vector<ChainCall> RaggedCalls(int64_t seed) {
  std::vector<ChainCall> calls;
  for (int64_t length : {0, 1, 3, 8, 5}) {
    for (bool bonus : {false, true}) {
      if (length == 0 && !bonus) continue;
      for (bool greedy : {false, true}) calls.push_back(RandomCall(length, bonus, greedy, seed++));
    }
  }
  return calls;
}

TEST(ChainRejectionTest, EveryChainOfARaggedBatchGetsItsDecisionAlone) {
  // Chains of every length, with and without a bonus row, greedy and sampled, judged by their
  // own or by pooled masses, all in one batch: each row is the chain's decision alone.
  int differing = 0, rows = 0;
  for (int64_t seed : {1, 100, 200}) {
    const std::vector<ChainCall> calls = RaggedCalls(seed);
    const torch::Tensor together = JudgeChains(calls);
    // Four decision columns, then a relaxed flag per draft of the longest chain (8).
    ASSERT_EQ(together.sizes(), (std::vector<int64_t>{static_cast<int64_t>(calls.size()), 4 + 8}));
    for (size_t i = 0; i < calls.size(); ++i) {
      const torch::Tensor alone = JudgeChains({calls[i]})[0];
      const int64_t width = alone.size(0);
      EXPECT_TRUE(together[i].narrow(0, 0, width).equal(alone))
          << "call " << i << " (length " << calls[i].length() << "): " << together[i] << " vs "
          << alone;
      EXPECT_EQ(together[i].narrow(0, width, 4 + 8 - width).count_nonzero().item<int64_t>(), 0)
          << "call " << i << ": flags past its chain";
      // The flags mark as many drafts as the relaxed count says, all of them kept.
      EXPECT_EQ(alone.narrow(0, 4, width - 4).sum().item<int64_t>(), alone[2].item<int64_t>());
      if (width > 4 + alone[0].item<int64_t>()) {
        EXPECT_EQ(
            alone.narrow(0, 4 + alone[0].item<int64_t>(), width - 4 - alone[0].item<int64_t>())
                .count_nonzero()
                .item<int64_t>(),
            0)
            << "call " << i << ": a relaxed flag on a draft that was not kept";
      }
    }
    // Control: the same chains with each other's numbers decide otherwise, so the rows above
    // depend on their own call's numbers and masses.
    std::vector<ChainCall> swapped = calls;
    for (size_t i = 0; i < calls.size(); ++i) {
      const ChainCall& other = calls[(i + 1) % calls.size()];
      if (other.length() != calls[i].length()) continue;
      swapped[i].accept_uniforms = other.accept_uniforms;
      swapped[i].draw_uniform = other.draw_uniform;
      swapped[i].p = other.p;
    }
    const torch::Tensor control = JudgeChains(swapped);
    for (size_t i = 0; i < calls.size(); ++i) {
      differing += !control[i].equal(together[i]);
      ++rows;
    }
  }
  EXPECT_GE(differing, rows / 4) << differing << " of " << rows;
}

TEST(ChainRejectionTest, JudgedTogetherChainsReadTheHostOncePerBatch) {
  // Two vocabularies: two batches, two reads, and every decision as alone.
  std::vector<ChainCall> calls = RaggedCalls(7);
  ChainCall wide = calls[3];
  wide.p = torch::cat({wide.p, torch::zeros({wide.p.size(0), 8})}, 1);
  wide.q = torch::cat({wide.q, torch::zeros({wide.q.size(0), 8})}, 1);
  calls.push_back(wide);
  const int64_t before = HostReadCount();
  const std::vector<ChainDecision> decisions = JudgeChainsTogether(calls);
  EXPECT_EQ(HostReadCount() - before, 2);
  ASSERT_EQ(decisions.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const torch::Tensor alone = JudgeChains({calls[i]})[0];
    EXPECT_EQ(decisions[i].kept, alone[0].item<int64_t>()) << i;
    EXPECT_EQ(decisions[i].next_token, alone[1].item<int64_t>()) << i;
    std::vector<int64_t> flagged;
    for (int64_t j = 4; j < alone.size(0); ++j) {
      if (alone[j].item<int64_t>() != 0) flagged.push_back(j - 4);
    }
    EXPECT_EQ(decisions[i].relaxed, flagged) << i;
    EXPECT_EQ(static_cast<int64_t>(decisions[i].relaxed.size()), alone[2].item<int64_t>()) << i;
    EXPECT_EQ(decisions[i].neighbors, alone[3].item<int64_t>()) << i;
  }
}

}  // namespace
}  // namespace mulo::engine
