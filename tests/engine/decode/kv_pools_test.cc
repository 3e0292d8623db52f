// The worker's KV-cache pools (engine/decode/kv_pools.h) under every method: each request's
// caches come from the slots it reserved, its tokens are its tokens with caches of its own,
// alone and inside mixed batches, and the CUDA graphs (emulated) of a run of slots serve the
// next request on them.
#include "engine/decode/kv_pools.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/decode/engine_loop.h"
#include "engine/decode/generate.h"
#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_demand.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::EveryMethodTwice;
using testing::SynthJob;
using Job = SynthJob;

const ModelSet& Family() { return testing::SynthFamily(); }

DecodeRequest RequestFor(const Job& job, const ModelSet& family) {
  return testing::SynthRequest(job, family);
}

StatusOr<DecodeResult> DecodeJob(const Job& job, const ModelSet& family, EngineLoop* loop,
                                 KvReservation* kv) {
  NullProgressSink sink;
  CancelToken cancel;
  return testing::DecodeSynthJob(job, family, loop, kv, cancel, sink);
}

// The job's tokens decoded alone with caches of its own (the oracle of the tests below),
// decoded once per job for the whole test binary: two tests compare against the same set.
const std::vector<int32_t>& LoneTokens(const Job& job) {
  static std::map<std::tuple<std::string, int, double>, std::vector<int32_t>> decoded;
  const auto key = std::make_tuple(job.method, job.prompt, job.temperature);
  auto it = decoded.find(key);
  if (it == decoded.end()) {
    auto own = DecodeJob(job, Family(), nullptr, nullptr);
    EXPECT_TRUE(own.ok()) << job.method << ": " << own.status().ToString();
    it = decoded.emplace(key, own.ok() ? own->tokens : std::vector<int32_t>()).first;
  }
  return it->second;
}

// The synth family as the server pools it: step graphs for its default method options.
KvPools::Family Pooled(const ModelSet& family) {
  auto pooled = PoolFamily("synth", family);
  EXPECT_TRUE(pooled.ok()) << pooled.status().ToString();
  return pooled.ok() ? *std::move(pooled)
                     : KvPools::Family("synth", &family, KvPools::GraphedShapes());
}

int64_t UsedSlots(const KvPools& pools) {
  int64_t used = 0;
  for (const KvPools::Usage& u : pools.usage()) used += u.used;
  return used;
}

TEST(KvPoolsTest, TheFamilysCachingModelsEachGetAPoolOfTwoSlotsPerRequest) {
  auto pools = KvPools::Make({Pooled(Family())}, 3);
  ASSERT_OK(pools);
  std::vector<std::string> components;
  for (const KvPools::Usage& u : (*pools)->usage()) {
    components.push_back(u.component);
    EXPECT_EQ(u.family, "synth");
    EXPECT_EQ(u.slots, 6) << u.component;
    EXPECT_EQ(u.used, 0);
    EXPECT_GT(u.bytes, 0);
    EXPECT_GT(u.slot_rows, KvPools::kDraftRows) << u.component;
  }
  // A target slot holds its longest cache (the condition and the image) and a draft tree.
  const TokenModel& target = *Family().target;
  EXPECT_EQ((*pools)->usage().at(0).slot_rows,
            target.CacheRows(target.condition_shape().rows) + KvPools::kDraftRows);
  // The synth family has every drafting component.
  EXPECT_EQ(components, (std::vector<std::string>{"target", "drafter", "chain", "eagle"}));
  EXPECT_EQ(KvPools::RequestBytes({Pooled(Family())}) * 3, (*pools)->MemoryBytes());
}

TEST(KvPoolsTest, AReservationTakesItsDemandOrNothing) {
  auto made = KvPools::Make({Pooled(Family())}, 1);
  ASSERT_OK(made);
  KvPools& pools = **made;
  SamplingParams guided;
  guided.cfg_scale = 4.0;
  const KvDemand mulo = RequestKvDemand(Family(), "mulo", guided);
  ASSERT_EQ(mulo.needs.size(), 2u);  // the target and the drafter; resamplers keep no cache
  EXPECT_EQ(mulo.needs[0].streams, 2);
  SamplingParams unguided;
  unguided.cfg_scale = 1.0;
  EXPECT_EQ(RequestKvDemand(Family(), "ar", unguided).needs.size(), 1u);
  EXPECT_EQ(RequestKvDemand(Family(), "ar", unguided).needs[0].streams, 1);

  auto first = pools.Reserve(mulo);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(UsedSlots(pools), 4);
  EXPECT_FALSE(pools.CanReserve(mulo));
  EXPECT_EQ(pools.Reserve(mulo), nullptr);
  EXPECT_EQ(UsedSlots(pools), 4) << "a reservation that does not fit takes nothing";
  // An unguided ar request still fits nowhere: the target's two slots are taken.
  EXPECT_FALSE(pools.CanReserve(RequestKvDemand(Family(), "ar", unguided)));
  first.reset();
  EXPECT_EQ(UsedSlots(pools), 0);
  EXPECT_TRUE(pools.CanReserve(mulo));
}

// Every method, greedy and sampled, alone: its caches all come from its reservation (none of
// its own, no overflow), its tokens are those it decodes with caches of its own, and its
// slots are reserved until the reservation goes.
TEST(KvPoolsTest, EveryMethodDecodesItsOwnTokensOverItsReservedSlots) {
  auto made = KvPools::Make({Pooled(Family())}, 1);
  ASSERT_OK(made);
  KvPools& pools = **made;
  for (const Job& job : EveryMethodTwice(Family())) {
    const std::vector<int32_t>& own = LoneTokens(job);
    ASSERT_FALSE(own.empty()) << job.method;
    const KvDemand demand = RequestKvDemand(Family(), job.method, RequestFor(job, Family()).sampling);
    auto reservation = pools.Reserve(demand);
    ASSERT_NE(reservation, nullptr) << job.method;
    auto pooled = DecodeJob(job, Family(), nullptr, reservation.get());
    ASSERT_OK(pooled);
    EXPECT_EQ(pooled->tokens, own) << job.method << " at " << job.temperature;
    EXPECT_EQ(reservation->unreserved(), 0) << job.method << " made a cache of its own";
    int64_t demanded = 0;
    for (const KvDemand::Need& need : demand.needs) demanded += need.streams;
    EXPECT_EQ(UsedSlots(pools), demanded) << job.method;
    reservation.reset();
    EXPECT_EQ(UsedSlots(pools), 0) << job.method;
  }
  for (const KvPools::Usage& u : pools.usage()) EXPECT_EQ(u.overflows, 0) << u.component;
}

// Every method twice, six at a time in one engine loop, each over its own reserved slots:
// each request's tokens are its lone tokens (the per-request-exact batches read the pool's
// views as they read caches of their own).
TEST(KvPoolsTest, MixedBatchesOverPooledCachesKeepEveryRequestsLoneTokens) {
  const std::vector<Job> jobs = EveryMethodTwice(Family());
  std::vector<std::vector<int32_t>> alone;
  for (const Job& job : jobs) {
    alone.push_back(LoneTokens(job));
    ASSERT_FALSE(alone.back().empty()) << job.method;
  }
  auto made = KvPools::Make({Pooled(Family())}, 6);
  ASSERT_OK(made);
  KvPools& pools = **made;
  std::vector<StatusOr<DecodeResult>> results(jobs.size(), InternalError("not run"));
  std::vector<int64_t> unreserved(jobs.size(), -1);
  EngineLoop loop({/*max_rows=*/256, PackedGemms::kPerSequence});
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < jobs.size(); ++i) {
    tasks.push_back([&, i] {
      auto reservation = pools.Reserve(
          RequestKvDemand(Family(), jobs[i].method, RequestFor(jobs[i], Family()).sampling));
      if (reservation == nullptr) return;  // reported as "not run"
      results[i] = DecodeJob(jobs[i], Family(), &loop, reservation.get());
      unreserved[i] = reservation->unreserved();
    });
  }
  EngineLoop::ListSource source(std::move(tasks), 6);
  ASSERT_OK(loop.Serve(source));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << jobs[i].method << " at " << jobs[i].temperature;
    EXPECT_EQ(unreserved[i], 0) << jobs[i].method;
  }
  EXPECT_GE(loop.counters().max_calls, 4);
  EXPECT_EQ(UsedSlots(pools), 0);
}

// The pools capture the step graphs of the options a family's requests take by default, as the
// method registry reads its family.json (choices in any case, the methods' own defaults under
// it), so that no request's default step falls back to eager for want of a graph.
TEST(KvPoolsTest, StepGraphsFollowTheFamilysMethodDefaultsAsTheRegistryReadsThem) {
  LoadOptions emulated;
  emulated.emulate_cuda_graphs = true;
  const std::shared_ptr<const ModelSet> loaded = testing::LoadSynthFamily(emulated);
  ASSERT_NE(loaded, nullptr);
  ModelSet family = *loaded;
  family.method_defaults["mulo"]["pooling"] = "MULTIPLICATIVE";  // the spec's own spelling
  family.method_defaults["mulo"]["radius"] = 1;
  family.method_defaults["mulo"]["k"] = 7;
  family.method_defaults["mulo"]["lambda"] = 3.0;
  auto config = DefaultMethodConfig("mulo", family);
  ASSERT_OK(config);
  ASSERT_EQ(config->mulo.pooling.kind, Pooling::kMultiplicative);
  auto pooled = PoolFamily("synth", family);
  ASSERT_OK(pooled);
  ASSERT_TRUE(pooled->shapes.mulo_verify.has_value());
  const MuloVerifyGraphs::Shape shape = *pooled->shapes.mulo_verify;
  EXPECT_EQ(shape.pooling.kind, Pooling::kMultiplicative);
  EXPECT_EQ(shape.pooling.k, 7);
  EXPECT_EQ(shape.pooling.lambda, 3.0);
  EXPECT_EQ(shape.radius, 1);
  EXPECT_EQ(shape.drafts, config->mulo.draft_rows * family.upsampler->config().factor *
                              family.target->grid_size());
  EXPECT_EQ(pooled->shapes.eagle_tree.depth, config->eagle.dynamic.depth);
  auto made = KvPools::Make({*pooled}, 1);
  ASSERT_OK(made);
  EXPECT_NE((*made)->mulo_verify_graphs(*family.target, shape), nullptr);
  MuloVerifyGraphs::Shape unpooled = shape;
  unpooled.pooling.kind = Pooling::kNone;
  EXPECT_EQ((*made)->mulo_verify_graphs(*family.target, unpooled), nullptr)
      << "only the defaults' shape is captured";
  // The family's drafter continues from its own tokens: its steps draft in the same replay
  // (step graphs); with D_r's prefix the drafter drafts apart and the graphs up-sample and
  // verify.
  EXPECT_TRUE(shape.draft);
  EXPECT_FALSE(shape.upsample);
  family.method_defaults["mulo"]["draft_prefix"] = "DOWNSAMPLED";
  auto downsampled = PoolFamily("synth", family);
  ASSERT_OK(downsampled);
  ASSERT_TRUE(downsampled->shapes.mulo_verify.has_value());
  EXPECT_FALSE(downsampled->shapes.mulo_verify->draft);
  EXPECT_TRUE(downsampled->shapes.mulo_verify->upsample);
  // Re-sampled otherwise than from the verify forward: no MuLo-SD verify graphs at all.
  family.method_defaults["mulo"]["resample"] = "SEQUENTIAL";
  auto sequential = PoolFamily("synth", family);
  ASSERT_OK(sequential);
  EXPECT_FALSE(sequential->shapes.mulo_verify.has_value());
  // A family.json the registry refuses is refused here too.
  family.method_defaults["mulo"]["radius"] = -1;
  EXPECT_FALSE(PoolFamily("synth", family).ok());
}

// The pools' batched graphs are captured at load; every request's forwards replay them, from
// its first (the prefill), and nothing is captured while requests decode.
TEST(KvPoolsTest, TheGraphsCapturedAtLoadServeEveryForwardOfEveryRequest) {
  LoadOptions emulated;
  emulated.emulate_cuda_graphs = true;
  const std::shared_ptr<const ModelSet> family = testing::LoadSynthFamily(emulated);
  ASSERT_NE(family, nullptr);
  auto made = KvPools::Make({Pooled(*family)}, 1);
  ASSERT_OK(made);
  KvPools& pools = **made;
  EXPECT_EQ(pools.usage().at(0).slot_rows % 256, 0) << "graphs attend over whole spans";
  const PoolGraphs::Counts loaded = pools.graph_counts();
  EXPECT_GT(loaded.graphs, 0);
  EXPECT_EQ(loaded.failed_captures, 0);
  EXPECT_EQ(loaded.replays, 0);
  const std::vector<Job> jobs = {{"ar", 0, 1.0}, {"ar", 1, 1.0}};
  for (const Job& job : jobs) {
    auto own = DecodeJob(job, *family, nullptr, nullptr);
    ASSERT_OK(own);
    auto reservation = pools.Reserve(
        RequestKvDemand(*family, job.method, RequestFor(job, *family).sampling));
    ASSERT_NE(reservation, nullptr);
    const PoolGraphs::Counts before = pools.graph_counts();
    auto result = DecodeJob(job, *family, nullptr, reservation.get());
    ASSERT_OK(result);
    const PoolGraphs::Counts after = pools.graph_counts();
    EXPECT_EQ(result->tokens, own->tokens) << "the pool's graphs against the request's own";
    EXPECT_EQ(after.graphs, loaded.graphs) << "captured while serving";
    // Every forward replays, the prefill included, and ar's rows one replay each
    // (row_graphs.h): the prefill, then a row of the grid per replay.
    EXPECT_EQ(after.replays - before.replays, 1 + family->target->grid_size())
        << "every forward, the prefill included, replays";
    EXPECT_EQ(after.eager_batches, 0);
  }
}

}  // namespace
}  // namespace mulo::engine
