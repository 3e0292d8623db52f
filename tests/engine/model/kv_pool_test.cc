// A KV-cache pool's slots (engine/model/kv_pool.h): adjacent runs taken first fit and returned
// by their last holder, caches that are views of the pool's memory, and a cache that outgrows
// its slots moving to memory of its own without changing a forward's output.
#include "engine/model/kv_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadFixtureModel;

KvCache Prototype() {
  return KvCache(/*n_layer=*/2, /*batch=*/1, /*n_kv_head=*/3, /*head_dim=*/4, /*capacity=*/1,
                 torch::dtype(torch::kFloat32));
}

TEST(KvPoolTest, RunsAreTakenFirstFitAndReturnWithTheirLastHolder) {
  auto made = KvPool::Make(Prototype(), 5, 8);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  KvPool& pool = **made;
  EXPECT_EQ(pool.MemoryBytes(), 5 * KvPool::SlotBytes(Prototype(), 8));
  EXPECT_EQ(KvPool::SlotBytes(Prototype(), 8), 2 * 2 * 3 * 8 * 4 * 4);
  auto a = pool.Take(2), b = pool.Take(1), c = pool.Take(2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a->first(), 0);
  EXPECT_EQ(b->first(), 2);
  EXPECT_EQ(c->first(), 3);
  EXPECT_EQ(pool.used_slots(), 5);
  EXPECT_EQ(pool.Take(1), nullptr);
  b.reset();
  // One slot free between two runs: a run of two does not fit there.
  EXPECT_TRUE(pool.CanTake(1));
  EXPECT_FALSE(pool.CanTake(2));
  // A cache over `a` keeps its slots taken after the run's handle goes.
  KvCache cache = pool.CacheOver(a, 2);
  a.reset();
  EXPECT_EQ(pool.used_slots(), 4);  // a's two (held by the cache) and c's two
  EXPECT_FALSE(pool.CanTake(2));
  { KvCache gone = std::move(cache); }
  EXPECT_EQ(pool.used_slots(), 2);
  auto d = pool.Take(3);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->first(), 0);
  EXPECT_FALSE(KvPool::Make(Prototype(), 0, 8).ok());
}

TEST(KvPoolTest, CachesAreViewsOfTheirOwnSlotsAndNeverOfAnothers) {
  auto made = KvPool::Make(Prototype(), 4, 8);
  ASSERT_TRUE(made.ok());
  KvPool& pool = **made;
  auto first = pool.Take(2), second = pool.Take(2);
  KvCache a = pool.CacheOver(first, 2), b = pool.CacheOver(second, 1);
  EXPECT_TRUE(a.pooled());
  EXPECT_EQ(a.capacity(), 8);
  EXPECT_EQ(b.batch(), 1);
  a.Store(0, torch::ones({2, 3, 5, 4}), torch::full({2, 3, 5, 4}, 2.0));
  a.Advance(5);
  b.Store(0, torch::full({1, 3, 2, 4}, 7.0), torch::full({1, 3, 2, 4}, 8.0));
  b.Advance(2);
  EXPECT_TRUE(a.Keys(0).equal(torch::ones({2, 3, 5, 4})));
  EXPECT_TRUE(a.Values(0).equal(torch::full({2, 3, 5, 4}, 2.0)));
  EXPECT_TRUE(b.Keys(0).equal(torch::full({1, 3, 2, 4}, 7.0)));
  // The same slots again: the same memory, so graphs captured over it stay valid.
  first.reset();
  // `a` still holds the first run, so a run of two comes from nowhere.
  EXPECT_EQ(pool.Take(2), nullptr);
  EXPECT_EQ(pool.used_slots(), 4);
}

// MoveRowsAt, the graph-safe Compact: on a slot-indexed view each stream moves its own rows in
// its own slot (all read before any is written, so overlapping moves are safe), leaving every
// other slot alone; on a cache of its own it keeps what Compact keeps.
TEST(KvPoolTest, MoveRowsAtMovesEachStreamsRowsInItsOwnSlot) {
  auto made = KvPool::Make(Prototype(), 4, 8);
  ASSERT_TRUE(made.ok());
  KvPool& pool = **made;
  auto run = pool.Take(2), other = pool.Take(1);
  KvCache cache = pool.CacheOver(run, 2), bystander = pool.CacheOver(other, 1);
  // Row r of stream b holds 10 b + r (keys) and -(10 b + r) (values) in every layer.
  const torch::Tensor rows = torch::arange(8, torch::kFloat32).view({1, 1, 8, 1});
  const torch::Tensor streams = torch::tensor({0.0f, 10.0f}).view({2, 1, 1, 1});
  const torch::Tensor keys = (rows + streams).expand({2, 3, 8, 4}).contiguous();
  for (int64_t layer = 0; layer < 2; ++layer) cache.Store(layer, keys, -keys);
  cache.Advance(8);
  bystander.Store(0, torch::full({1, 3, 8, 4}, 99.0), torch::full({1, 3, 8, 4}, 98.0));
  bystander.Advance(8);
  KvCache view = pool.SlotIndexedView(
      torch::tensor(std::vector<int64_t>{cache.first_slot(), cache.first_slot() + 1}));
  // Stream 0 keeps rows 5, 7 at 3, 4 (row 4 is read before it is written); stream 1 moves
  // rows 3, 4 onto themselves.
  view.MoveRowsAt(torch::tensor(std::vector<int64_t>{5, 7, 3, 4}).view({2, 2}),
                  torch::tensor(std::vector<int64_t>{3, 4, 3, 4}).view({2, 2}));
  for (int64_t layer = 0; layer < 2; ++layer) {
    const torch::Tensor k = cache.Keys(layer).select(1, 0).select(2, 0);  // [2, 8]
    const std::vector<float> kept = {0, 1, 2, 5, 7, 5, 6, 7};
    const std::vector<float> unmoved = {10, 11, 12, 13, 14, 15, 16, 17};
    EXPECT_TRUE(k[0].equal(torch::tensor(kept))) << k;
    EXPECT_TRUE(k[1].equal(torch::tensor(unmoved))) << k;
    EXPECT_TRUE(cache.Values(layer).equal(-cache.Keys(layer)));
  }
  EXPECT_TRUE(bystander.Keys(0).equal(torch::full({1, 3, 8, 4}, 99.0)));
  // A cache of its own: stream 0's moves for every stream, as Compact({0, 1, 2, 5, 7}).
  KvCache own(2, 2, 3, 4, 8, torch::dtype(torch::kFloat32));
  KvCache compacted(2, 2, 3, 4, 8, torch::dtype(torch::kFloat32));
  for (int64_t layer = 0; layer < 2; ++layer) {
    own.Store(layer, keys, -keys);
    compacted.Store(layer, keys, -keys);
  }
  own.Advance(8);
  compacted.Advance(8);
  own.MoveRowsAt(torch::tensor(std::vector<int64_t>{5, 7}).view({1, 2}),
                 torch::tensor(std::vector<int64_t>{3, 4}).view({1, 2}));
  ASSERT_TRUE(own.Truncate(5).ok());
  ASSERT_TRUE(compacted.Compact({0, 1, 2, 5, 7}).ok());
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_TRUE(own.Keys(layer).equal(compacted.Keys(layer)));
    EXPECT_TRUE(own.Values(layer).equal(compacted.Values(layer)));
  }
}

// A forward that needs more rows than the slot holds: the cache moves to memory of its own
// (counted), and the model's outputs equal those over a cache of its own.
TEST(KvPoolTest, ACacheThatOutgrowsItsSlotMovesOutAndComputesTheSame) {
  auto model = LoadFixtureModel("tar_tiny");
  ASSERT_NE(model, nullptr);
  const Transformer& m = *model;
  const auto& c = m.config();
  auto made = KvPool::Make(m.NewCache(1, 1), 2, c.cls_token_num + 4);
  ASSERT_TRUE(made.ok());
  KvPool& pool = **made;
  auto slots = pool.Take(2);
  KvCache pooled = pool.CacheOver(slots, 2);
  KvCache own = m.NewCache(2, c.max_positions());
  at::manual_seed(3);
  Condition condition;
  condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  auto cond = m.EmbedCondition(condition, true);
  ASSERT_TRUE(cond.ok());
  auto ids = torch::randint(c.vocab_size, {1, 10}, torch::kInt64).expand({2, 10}).contiguous();
  auto positions = torch::arange(m.TokenPosition(0), m.TokenPosition(10));
  torch::Tensor logits[2];
  int i = 0;
  for (KvCache* cache : {&pooled, &own}) {
    ASSERT_TRUE(m.Prefill(*cache, *cond, LogitsMode::kNone).ok());
    auto out = m.ForwardTokens(*cache, ids, positions, LogitsMode::kAll);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    logits[i++] = out->logits;
  }
  EXPECT_TRUE(logits[0].equal(logits[1]));
  EXPECT_EQ(pool.overflows(), 1);
  EXPECT_TRUE(pooled.pooled()) << "its slots stay counted until the request ends";
  EXPECT_GT(pooled.capacity(), c.cls_token_num + 4);
  EXPECT_EQ(pool.used_slots(), 2);
}

}  // namespace
}  // namespace mulo::engine
