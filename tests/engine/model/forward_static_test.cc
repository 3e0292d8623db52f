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
  at::manual_seed(5);
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
                                   torch::Tensor(), LogitsMode::kAll)
                   .logits;
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
    at::manual_seed(9);
    Fed eager = Feed(*model, false, 0);
    at::manual_seed(9);
    Fed graph_safe = Feed(*model, true, 0);
    EXPECT_LE(MaxAbsDiff(graph_safe.logits, eager.logits), 1e-5) << name;
    ASSERT_EQ(graph_safe.cache.length(), eager.cache.length());
    for (int64_t layer = 0; layer < model->config().n_layer; ++layer) {
      EXPECT_LE(MaxAbsDiff(graph_safe.cache.Keys(layer), eager.cache.Keys(layer)), 1e-5);
      EXPECT_LE(MaxAbsDiff(graph_safe.cache.Values(layer), eager.cache.Values(layer)), 1e-5);
    }
    // Control: rows written one place too far leave a stale row inside the mask.
    at::manual_seed(9);
    Fed shifted = Feed(*model, true, 1);
    EXPECT_GT(MaxAbsDiff(shifted.logits, eager.logits), 1e-3) << name;
  }
}

// A draft tree's masked forward, laid out as a bucketed graph reads it (PadGraphInputs: 5 live
// rows padded to 8, the mask as an input), then a causal append after keeping one path: both
// equal the eager engine's, although the pad rows wrote stale keys past the live length.
// Control: pad rows visible to the live rows change the logits.
struct TreeRun {
  torch::Tensor tree_logits, next_logits;
};

TreeRun RunTree(const Transformer& model, bool use_static, bool leak_pad_rows) {
  const auto& c = model.config();
  at::manual_seed(3);
  Condition condition;
  if (c.condition_mode == ConditionMode::kClassLabel) {
    condition.class_label = 2;
  } else {
    condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  }
  KvCache cache = model.NewCache(2, ForwardGraphs::RoundUpToSpan(c.max_positions()));
  auto cond = model.EmbedCondition(condition, true);
  EXPECT_TRUE(cond.ok());
  EXPECT_TRUE(model.Prefill(cache, *cond, LogitsMode::kNone).ok());
  auto prefix = torch::randint(c.vocab_size, {1, 3}, torch::kInt64).expand({2, 3}).contiguous();
  EXPECT_TRUE(model.ForwardTokens(cache, prefix, torch::arange(model.TokenPosition(0),
                                                               model.TokenPosition(3)),
                                  LogitsMode::kAll)
                  .ok());
  // Tree: 0 is the root (raster 3); 1 and 2 its children (raster 4); 3 under 1, 4 under 2.
  const std::vector<int64_t> parent = {-1, 0, 0, 1, 2}, raster = {3, 4, 4, 5, 5};
  const int64_t n = 5, length = cache.length();
  auto mask = torch::zeros({n, length + n}, torch::kBool);
  mask.narrow(1, 0, length).fill_(true);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t a = i; a >= 0; a = parent[a]) mask[i][length + a] = true;
  }
  auto ids = torch::randint(c.vocab_size, {1, n}, torch::kInt64).expand({2, n}).contiguous();
  std::vector<int64_t> positions;
  for (int64_t r : raster) positions.push_back(model.TokenPosition(r));
  const auto pos = torch::tensor(positions, torch::kInt64);
  TreeRun run;
  if (use_static) {
    const int64_t rows = ForwardGraphs::GraphRows(n, true);
    EXPECT_EQ(rows, 8);
    const int64_t span = ForwardGraphs::RoundUpToSpan(length + rows);
    GraphInputs in = PadGraphInputs(ids, pos, mask, length, rows, span);
    EXPECT_EQ(in.ids.sizes(), (std::vector<int64_t>{2, rows}));
    EXPECT_EQ(in.mask.sizes(), (std::vector<int64_t>{rows, span}));
    if (leak_pad_rows) in.mask.narrow(0, 0, n).narrow(1, length + n, rows - n).fill_(true);
    run.tree_logits = model
                          .ForwardStatic(cache, in.ids, in.positions, in.first_row, span, in.mask,
                                         LogitsMode::kAll)
                          .logits.narrow(1, 0, n);
    cache.Advance(n);
  } else {
    auto out = model.ForwardTokens(cache, ids, pos, mask, LogitsMode::kAll);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    run.tree_logits = out->logits;
  }
  // Keep the path 0 -> 2 -> 4, then append raster 6 causally.
  std::vector<int64_t> keep;
  for (int64_t r = 0; r < length; ++r) keep.push_back(r);
  for (int64_t node : {0, 2, 4}) keep.push_back(length + node);
  EXPECT_TRUE(cache.Compact(keep).ok());
  auto next = torch::randint(c.vocab_size, {1, 1}, torch::kInt64).expand({2, 1}).contiguous();
  auto out = model.ForwardTokens(cache, next, torch::full({1}, model.TokenPosition(6)),
                                 LogitsMode::kAll);
  EXPECT_TRUE(out.ok());
  run.next_logits = out->logits;
  return run;
}

TEST(ForwardStaticTest, APaddedMaskedTreeMatchesTheEagerOne) {
  for (const std::string name : {"tar_tiny", "llamagen_c2i_tiny"}) {
    auto model = LoadFixtureModel(name);
    ASSERT_NE(model, nullptr);
    const TreeRun eager = RunTree(*model, false, false);
    const TreeRun padded = RunTree(*model, true, false);
    EXPECT_LE(MaxAbsDiff(padded.tree_logits, eager.tree_logits), 1e-5) << name;
    EXPECT_LE(MaxAbsDiff(padded.next_logits, eager.next_logits), 1e-5) << name;
    const TreeRun leaked = RunTree(*model, true, true);
    EXPECT_GT(MaxAbsDiff(leaked.tree_logits, eager.tree_logits), 1e-3) << name;
  }
}

TEST(ForwardStaticTest, GraphRowsArePowersOfTwoWithBuckets) {
  EXPECT_EQ(ForwardGraphs::GraphRows(1, true), 1);
  EXPECT_EQ(ForwardGraphs::GraphRows(5, true), 8);
  EXPECT_EQ(ForwardGraphs::GraphRows(16, true), 16);
  EXPECT_EQ(ForwardGraphs::GraphRows(17, true), 32);
  EXPECT_EQ(ForwardGraphs::GraphRows(5, false), 5);
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
