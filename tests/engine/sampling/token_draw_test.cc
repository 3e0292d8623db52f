// The engine loop's batched draw: every request's tokens in a batch of draws equal the tokens
// it draws alone, bit for bit, whatever its neighbours' shapes and sampling parameters; and
// the batch really mixes, tempers and filters per request (a draw made with a neighbour's
// parameters gives other tokens, so the equality is not vacuous).
#include "engine/sampling/token_draw.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <vector>

namespace mulo::engine {
namespace {

constexpr int64_t kVocab = 512;

SamplingParams Params(double cfg, double temperature, int64_t top_k = 0, double top_p = 1.0) {
  SamplingParams p;
  p.cfg_scale = cfg;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

// A call of `streams` guidance streams and k positions ([streams, V] when k is 0), with its
// own logits and numbers.
DrawCall Call(int64_t streams, int64_t k, const SamplingParams& sampling, uint64_t seed) {
  at::manual_seed(seed);
  DrawCall call;
  call.logits = 3 * (k == 0 ? torch::randn({streams, kVocab}) : torch::randn({streams, k, kVocab}));
  call.sampling = sampling;
  if (sampling.temperature > 0) {
    call.uniforms = torch::rand({k == 0 ? 1 : k}, torch::kFloat64);
  }
  return call;
}

std::vector<int64_t> Ids(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(TokenDrawTest, EveryCallOfABatchDrawsExactlyItsLoneTokens) {
  std::vector<DrawCall> calls;
  uint64_t seed = 1;
  // Eight requests alike (ar at concurrency 8), then neighbours that differ in every key.
  for (int i = 0; i < 8; ++i) calls.push_back(Call(2, 0, Params(4.0, 1.0), seed++));
  calls.push_back(Call(2, 3, Params(4.0, 1.0), seed++));        // k = 3, joins the eight
  calls.push_back(Call(1, 0, Params(1.0, 1.0), seed++));        // no guidance
  calls.push_back(Call(2, 0, Params(2.0, 0.7, 20), seed++));    // top-k
  calls.push_back(Call(2, 0, Params(2.0, 0.7, 20), seed++));
  calls.push_back(Call(2, 2, Params(4.0, 1.0, 0, 0.9), seed++));  // top-p
  calls.push_back(Call(2, 0, Params(4.0, 0.0), seed++));        // greedy: no numbers
  calls.push_back(Call(2, 4, Params(4.0, 0.0), seed++));
  const std::vector<torch::Tensor> together = TokenDrawer().DrawBatch(calls);
  ASSERT_EQ(together.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const torch::Tensor alone = DrawTokens(calls[i]);
    EXPECT_EQ(together[i].sizes(), alone.sizes()) << "call " << i;
    EXPECT_EQ(Ids(together[i]), Ids(alone)) << "call " << i;
  }
}

TEST(TokenDrawTest, ADrawDependsOnItsOwnParametersAndNumbers) {
  // The control for the test above: were the batch to draw a call with a neighbour's
  // parameters or numbers, its tokens would change.
  int changed_by_params = 0, changed_by_numbers = 0;
  for (uint64_t seed = 100; seed < 132; ++seed) {
    DrawCall call = Call(2, 4, Params(4.0, 1.0), seed);
    DrawCall other_params = call;
    other_params.sampling = Params(1.5, 0.5, 5);
    // Numbers matter most where the law is spread: no guidance, temperature 2.
    DrawCall spread = Call(2, 4, Params(1.0, 2.0), seed);
    DrawCall other_numbers = spread;
    other_numbers.uniforms = torch::rand({4}, torch::kFloat64);
    changed_by_params += Ids(DrawTokens(call)) != Ids(DrawTokens(other_params));
    changed_by_numbers += Ids(DrawTokens(spread)) != Ids(DrawTokens(other_numbers));
  }
  EXPECT_GT(changed_by_params, 24);
  EXPECT_GT(changed_by_numbers, 24);
}

}  // namespace
}  // namespace mulo::engine
