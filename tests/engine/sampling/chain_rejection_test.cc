// The device chain verifier (ExactVerifier::Verify with the default rules, through
// VerifyChain) makes the host loop's decisions (ExactVerifier::VerifyOnHost, the oracle) given
// the same random streams, and leaves the streams where the host loop leaves them.
#include "engine/sampling/chain_rejection.h"

#include <gtest/gtest.h>

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
  torch::manual_seed(seed);
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

TEST(ChainRejectionTest, ARejectedGreedyDraftIsReplacedByTheTargetsArgmax) {
  // q one-hot at 3, p one-hot at 5: the draft is rejected and the residual is p itself.
  const torch::Tensor q = OneHotRows(torch::tensor({3}, torch::kInt64));
  const torch::Tensor p = OneHotRows(torch::tensor({5, 9}, torch::kInt64));
  const torch::Tensor result =
      VerifyChain(p, q, torch::tensor({3}, torch::kInt64), torch::tensor({0.5}, torch::kFloat64),
                  torch::tensor({0.25}, torch::kFloat64), /*greedy=*/true);
  EXPECT_EQ(result[0].item<int64_t>(), 0);
  EXPECT_EQ(result[1].item<int64_t>(), 5);
  // Kept instead (p = q): the greedy bonus is the last row's argmax.
  const torch::Tensor kept =
      VerifyChain(OneHotRows(torch::tensor({3, 9}, torch::kInt64)), q,
                  torch::tensor({3}, torch::kInt64), torch::tensor({0.5}, torch::kFloat64),
                  torch::tensor({0.25}, torch::kFloat64), /*greedy=*/true);
  EXPECT_EQ(kept[0].item<int64_t>(), 1);
  EXPECT_EQ(kept[1].item<int64_t>(), 9);
}

}  // namespace
}  // namespace mulo::engine
