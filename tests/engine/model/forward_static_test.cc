// The graph-capturable forward (Transformer::ForwardStatic: KV rows addressed by a device
// tensor, attention over a padded span under a mask) computes what the eager causal append
// computes, on the CPU too; and the CPU build never attaches CUDA graphs.
#include <gtest/gtest.h>

#include "engine/model/forward_graphs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::LoadFixtureModel;
using testing::MaxAbsDiff;

struct Fed {
  torch::Tensor logits;
  KvCache cache;
};

// Prefill, then two appends (3 and 5 tokens) either eagerly or through ForwardStatic with the
// first row shifted by `row_shift` (0 = correct).
Fed Feed(const Transformer& model, bool use_static, int64_t row_shift) {
  const auto& c = model.config();
  Condition condition;
  torch::manual_seed(5);
  if (c.condition_mode == ConditionMode::kClassLabel) {
    condition.class_label = 1;
  } else {
    condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  }
  KvCache cache = model.NewCache(2, ForwardGraphs::RoundUpToSpan(c.max_positions()));
  auto cond = model.EmbedCondition(condition, true);
  EXPECT_TRUE(cond.ok());
  EXPECT_TRUE(model.Prefill(cache, *cond, LogitsMode::kNone).ok());
  torch::Tensor logits;
  int64_t fed = 0;
  for (int64_t n : {3, 5}) {
    auto ids = torch::randint(c.vocab_size, {1, n}, torch::kInt64).expand({2, n}).contiguous();
    auto positions = torch::arange(model.TokenPosition(fed), model.TokenPosition(fed + n));
    if (use_static) {
      auto first_row = torch::full({1}, cache.length() + row_shift, torch::kInt64);
      logits = model.ForwardStatic(cache, ids, positions, first_row, cache.capacity(),
                                   LogitsMode::kAll).logits;
      cache.Advance(n);
    } else {
      auto out = model.ForwardTokens(cache, ids, positions, LogitsMode::kAll);
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      logits = out->logits;
    }
    fed += n;
  }
  return {logits, std::move(cache)};
}

TEST(ForwardStaticTest, MatchesTheEagerAppendOverAPaddedSpan) {
  // tar_tiny: abs_pe; llamagen_c2i_tiny: 2D RoPE and grouped-query attention.
  for (const std::string name : {"tar_tiny", "llamagen_c2i_tiny"}) {
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    torch::manual_seed(9);
    Fed eager = Feed(*model, false, 0);
    torch::manual_seed(9);
    Fed graph_safe = Feed(*model, true, 0);
    EXPECT_LE(MaxAbsDiff(graph_safe.logits, eager.logits), 1e-5) << name;
    ASSERT_EQ(graph_safe.cache.length(), eager.cache.length());
    for (int64_t layer = 0; layer < model->config().n_layer; ++layer) {
      EXPECT_LE(MaxAbsDiff(graph_safe.cache.Keys(layer), eager.cache.Keys(layer)), 1e-5);
      EXPECT_LE(MaxAbsDiff(graph_safe.cache.Values(layer), eager.cache.Values(layer)), 1e-5);
    }
    // Control: rows written one place too far leave a stale row inside the mask.
    torch::manual_seed(9);
    Fed shifted = Feed(*model, true, 1);
    EXPECT_GT(MaxAbsDiff(shifted.logits, eager.logits), 1e-3) << name;
  }
}

TEST(ForwardStaticTest, TheCpuBuildAttachesNoGraphs) {
  EXPECT_FALSE(CudaGraphsAvailable(torch::Device(torch::kCPU)));
  auto model = LoadFixtureModel("tar_tiny");
  ASSERT_NE(model, nullptr);
  EXPECT_FALSE(model->uses_cuda_graphs());
  EXPECT_EQ(model->NewCache(1, 8).graphs(), nullptr);
  EXPECT_EQ(ForwardGraphs::RoundUpToSpan(1), ForwardGraphs::kSpanRows);
  EXPECT_EQ(ForwardGraphs::RoundUpToSpan(ForwardGraphs::kSpanRows), ForwardGraphs::kSpanRows);
  EXPECT_EQ(ForwardGraphs::RoundUpToSpan(ForwardGraphs::kSpanRows + 1),
            2 * ForwardGraphs::kSpanRows);
}

}  // namespace
}  // namespace mulo::engine
