// A KV-cache pool's batched graphs (engine/model/pool_graphs.h), emulated on the CPU: captured
// at load, a batch of requests' calls over their slots (guidance batches of 1 and 2, 1-5 new
// rows over different cached lengths, causal and tree masks, every logits mode) replays one
// graph and computes what each call's eager forward over a cache of its own computes; pad
// streams touch no request's slot; a batch no key fits runs eagerly, counted.
#include "engine/model/pool_graphs.h"

#include <gtest/gtest.h>

#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;
using testing::MaxAbsDiff;

std::shared_ptr<const Transformer> LoadEmulated(const std::string& name) {
  LoadOptions options;
  options.emulate_cuda_graphs = true;
  auto model = Transformer::LoadDirectory(FixtureDir(name), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? *model : nullptr;
}

struct PoolWithGraphs {
  std::shared_ptr<KvPool> pool;
  PoolGraphs* graphs = nullptr;
};

PoolWithGraphs MakePool(const Transformer& m, int64_t slots) {
  const int64_t rows = ForwardGraphs::RoundUpToSpan(m.config().max_positions());
  auto pool = KvPool::Make(m.NewCache(1, 1), slots, rows, /*scratch_slot=*/true);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  auto graphs = m.CapturePoolGraphs(**pool);
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_NE(*graphs, nullptr);
  (*pool)->SetGraphs(*graphs);
  return {*pool, graphs->get()};
}

// One request's call: its guidance streams, cached image tokens before it, new rows, whether
// it feeds a draft tree (a mask) and its logits mode.
struct Request {
  int64_t batch, cached, n;
  bool tree;
  LogitsMode mode;
};

torch::Tensor TreeMask(int64_t length, int64_t n) {
  // Every cached row; each new row sees itself and the new rows of its parent chain, where
  // node i's parent is (i - 1) / 2 (a binary tree).
  torch::Tensor mask = torch::zeros({n, length + n}, torch::kBool);
  mask.narrow(1, 0, length).fill_(true);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i;; j = (j - 1) / 2) {
      mask[i][length + j] = true;
      if (j == 0) break;
    }
  }
  return mask;
}

TEST(PoolGraphsTest, ABatchOfCallsReplaysOneGraphAndComputesTheirEagerForwards) {
  // tar_tiny: a learned position table; llamagen_c2i_tiny: 2D RoPE, grouped-query attention.
  for (const std::string name : {"tar_tiny", "llamagen_c2i_tiny"}) {
    SCOPED_TRACE(name);
    auto model = LoadEmulated(name);
    ASSERT_NE(model, nullptr);
    const Transformer& m = *model;
    const auto& c = m.config();
    PoolWithGraphs made = MakePool(m, /*slots=*/8);
    KvPool& pool = *made.pool;
    const PoolGraphs::Counts loaded = made.graphs->counts();
    EXPECT_GT(loaded.graphs, 0);
    EXPECT_EQ(loaded.replays, 0);

    const std::vector<Request> requests = {{2, 4, 1, false, LogitsMode::kAll},
                                           {1, 9, 5, true, LogitsMode::kAll},
                                           {2, 0, 3, false, LogitsMode::kLast},
                                           {1, 2, 2, false, LogitsMode::kNone}};
    // A bystander's slot, prefilled: no batch it is not in may touch it.
    auto bystander_slots = pool.Take(1);
    KvCache bystander = pool.CacheOver(bystander_slots, 1);
    at::manual_seed(7);
    Condition condition;
    if (c.condition_mode == ConditionMode::kClassLabel) {
      condition.class_label = 1;
    } else {
      condition.features = torch::randn({c.cls_token_num, c.cond_dim});
    }
    auto single = m.EmbedCondition(condition, false);
    ASSERT_OK(single);
    ASSERT_OK(m.Prefill(bystander, *single, LogitsMode::kNone));
    const torch::Tensor bystander_keys = bystander.Keys(0).clone();

    std::vector<std::shared_ptr<KvSlots>> slots;
    std::vector<KvCache> pooled, own;
    std::vector<ForwardCall> calls;
    for (const Request& r : requests) {
      slots.push_back(pool.Take(r.batch));
      ASSERT_NE(slots.back(), nullptr);
      pooled.push_back(pool.CacheOver(slots.back(), r.batch));
      own.push_back(m.NewCache(r.batch, c.max_positions()));
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request& r = requests[i];
      auto cond = m.EmbedCondition(condition, r.batch == 2);
      ASSERT_OK(cond);
      auto cached = torch::randint(c.vocab_size, {1, r.cached + 1}, torch::kInt64)
                        .expand({r.batch, r.cached + 1})
                        .contiguous();
      for (KvCache* cache : {&pooled[i], &own[i]}) {
        ASSERT_OK(m.Prefill(*cache, *cond, LogitsMode::kNone));
        if (r.cached > 0) {
          ASSERT_OK(m.ForwardTokens(*cache, cached.narrow(1, 0, r.cached),
                                    torch::arange(m.TokenPosition(0), m.TokenPosition(r.cached)),
                                    LogitsMode::kNone));
        }
      }
      EXPECT_EQ(pooled[i].length(), own[i].length());
      auto ids = torch::randint(c.vocab_size, {r.batch, r.n}, torch::kInt64);
      auto embeddings = m.EmbedTokens(ids);
      ASSERT_OK(embeddings);
      const int64_t first = r.cached;
      torch::Tensor positions =
          r.tree ? torch::full({r.n}, m.TokenPosition(first), torch::kInt64) +
                       torch::tensor(std::vector<int64_t>{0, 1, 1, 2, 2}).narrow(0, 0, r.n)
                 : torch::arange(m.TokenPosition(first), m.TokenPosition(first + r.n));
      calls.push_back({&pooled[i], *embeddings, positions,
                       r.tree ? TreeMask(pooled[i].length(), r.n) : torch::Tensor(), r.mode});
    }
    const PoolGraphs::Counts before = made.graphs->counts();
    auto batched = m.ForwardBatch(calls, PackedGemms::kPerSequence);
    ASSERT_OK(batched);
    const PoolGraphs::Counts after = made.graphs->counts();
    EXPECT_EQ(after.replays - before.replays, 1) << "one graph for the whole batch";
    EXPECT_EQ(after.calls - before.calls, 4);
    EXPECT_EQ(after.graphs, loaded.graphs) << "nothing captured while serving";
    EXPECT_EQ(after.eager_batches, 0);
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE("call " + std::to_string(i));
      const ForwardCall& call = calls[i];
      auto eager = m.Forward(own[i], call.embeddings, call.positions, call.mask, call.logits_mode);
      ASSERT_OK(eager);
      const ForwardOutput& out = (*batched)[i];
      EXPECT_EQ(out.hidden.sizes(), eager->hidden.sizes());
      EXPECT_LT(MaxAbsDiff(out.hidden, eager->hidden), 1e-4);
      ASSERT_EQ(out.logits.defined(), eager->logits.defined());
      if (out.logits.defined()) {
        EXPECT_EQ(out.logits.sizes(), eager->logits.sizes());
        EXPECT_LT(MaxAbsDiff(out.logits, eager->logits), 1e-4);
      }
      EXPECT_EQ(pooled[i].length(), own[i].length());
      for (int64_t layer = 0; layer < pooled[i].num_layers(); ++layer) {
        EXPECT_LT(MaxAbsDiff(pooled[i].Keys(layer), own[i].Keys(layer)), 1e-4);
        EXPECT_LT(MaxAbsDiff(pooled[i].Values(layer), own[i].Values(layer)), 1e-4);
      }
    }
    // 6 live streams ran as 8: the two pad streams wrote to the scratch slot only.
    EXPECT_TRUE(bystander.Keys(0).equal(bystander_keys));
  }
}

TEST(PoolGraphsTest, ABatchNoKeyFitsRunsEagerlyAndIsCounted) {
  auto model = LoadEmulated("tar_tiny");
  ASSERT_NE(model, nullptr);
  const Transformer& m = *model;
  const auto& c = m.config();
  PoolWithGraphs made = MakePool(m, /*slots=*/10);
  // Four guided requests feeding one token and one unguided feeding 40: 9 streams of up to 40
  // rows run as 16 x 64 = 1,024 rows, past every key (at most 512).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 1}, {2, 1}, {2, 1}, {2, 1}, {1, 40}};
  std::vector<std::shared_ptr<KvSlots>> slots;
  std::vector<KvCache> pooled, own;
  std::vector<ForwardCall> calls;
  Condition condition;
  condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  for (const auto& [batch, n] : shapes) {
    slots.push_back(made.pool->Take(batch));
    ASSERT_NE(slots.back(), nullptr);
    pooled.push_back(made.pool->CacheOver(slots.back(), batch));
    own.push_back(m.NewCache(batch, c.max_positions()));
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [batch, n] = shapes[i];
    auto cond = m.EmbedCondition(condition, batch == 2);
    ASSERT_OK(cond);
    ASSERT_OK(m.Prefill(pooled[i], *cond, LogitsMode::kNone));
    ASSERT_OK(m.Prefill(own[i], *cond, LogitsMode::kNone));
    auto embeddings = m.EmbedTokens(torch::randint(c.vocab_size, {batch, n}, torch::kInt64));
    ASSERT_OK(embeddings);
    calls.push_back({&pooled[i], *embeddings,
                     torch::arange(m.TokenPosition(0), m.TokenPosition(n)), torch::Tensor(),
                     LogitsMode::kAll});
  }
  const PoolGraphs::Counts before = made.graphs->counts();
  EXPECT_EQ(before.replays, 5) << "the prefills replayed";
  auto batched = m.ForwardBatch(calls, PackedGemms::kPerSequence);
  ASSERT_OK(batched);
  EXPECT_EQ(made.graphs->counts().eager_batches, 1);
  EXPECT_EQ(made.graphs->counts().replays, before.replays);
  for (size_t i = 0; i < calls.size(); ++i) {
    auto eager = m.Forward(own[i], calls[i].embeddings, calls[i].positions, torch::Tensor(),
                           LogitsMode::kAll);
    ASSERT_OK(eager);
    // The eager batch over the slots; the prefills before it were graphs (within rounding).
    EXPECT_LT(MaxAbsDiff((*batched)[i].logits, eager->logits), 1e-4) << "call " << i;
  }
}

TEST(PoolGraphsTest, APoolWithoutAScratchSlotIsRefused) {
  auto model = LoadEmulated("tar_tiny");
  ASSERT_NE(model, nullptr);
  auto pool = KvPool::Make(model->NewCache(1, 1), 2, 256);
  ASSERT_OK(pool);
  auto graphs = model->CapturePoolGraphs(**pool);
  EXPECT_EQ(graphs.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mulo::engine
