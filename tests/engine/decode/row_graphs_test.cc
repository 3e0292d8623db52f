// ar's whole rows per graph replay (engine/model/row_graphs.h, issue 61): over a pool with
// (emulated) graphs, an ar request draws and feeds each row of its grid in one replay, and
//   - decodes the tokens it decodes token by token without graphs (greedy exactly; sampled up
//     to a rounding flip, as emulated_graphs_test allows);
//   - pays per row one replay, one host read and at most 10 operators outside graphs;
//   - batches its rows with other requests' in one replay, whatever their temperatures,
//     guidance scales and top-k / top-p filters, each keeping its lone tokens;
//   - with top-k or top-p, runs its rows in the filtered graphs with the eager filtered
//     decode's tokens;
//   - steps token by token where a row graph cannot serve it (no guidance).
#include "engine/model/row_graphs.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/core/host_read.h"
#include "engine/core/op_count.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_set.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

std::shared_ptr<const ModelSet> Emulated() { return testing::EmulatedSynthFamily(); }

// An ar request of the synth family: held-out prompt `prompt`, seed 1000 + prompt, with
// `temperature`, the family's guidance unless `cfg_scale` > 0, `top_k` and `top_p`.
DecodeRequest ArRequest(const ModelSet& family, int prompt, double temperature,
                        double cfg_scale = 0, int64_t top_k = 0, double top_p = 1.0) {
  DecodeRequest request = testing::SynthRequest({"ar", prompt, temperature}, family);
  if (cfg_scale > 0) request.sampling.cfg_scale = cfg_scale;
  request.sampling.top_k = top_k;
  request.sampling.top_p = top_p;
  return request;
}

StatusOr<DecodeResult> DecodeAr(const ModelSet& family, DecodeRequest request,
                                EngineLoop* loop = nullptr, KvReservation* kv = nullptr) {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig("ar", family));
  return testing::DecodeConfig(config, family, std::move(request), loop, kv);
}

std::unique_ptr<KvPools> Pools(const ModelSet& family, int64_t requests) {
  return testing::SynthPools(family, requests);
}

std::unique_ptr<KvReservation> Reserve(KvPools& pools, const ModelSet& family,
                                       const DecodeRequest& request) {
  return testing::ReserveFor(pools, family, "ar", request);
}

TEST(RowGraphsTest, ARowPerReplayDecodesTheTokenStepsTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = Emulated();
  ASSERT_NE(emulated, nullptr);
  auto pools = Pools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  const int64_t grid = emulated->target->grid_size();
  for (double temperature : {0.0, 1.0}) {
    // Greedy exactly; sampled: prompt 0, or if a rounding flip changed it, both of 1 and 2.
    int mismatches = 0;
    for (int prompt : {0, 1, 2}) {
      const DecodeRequest request = ArRequest(*emulated, prompt, temperature);
      auto eager = DecodeAr(plain, request);
      ASSERT_OK(eager);
      EXPECT_EQ(eager->stats.graph_replays, 0);
      auto reservation = Reserve(*pools, *emulated, request);
      ASSERT_NE(reservation, nullptr);
      const OpCounts ops_before = ThreadOpCounts();
      StatusOr<DecodeResult> rows = InternalError("not run");
      {
        OpCounting counting;
        rows = DecodeAr(*emulated, request, nullptr, reservation.get());
      }
      ASSERT_OK(rows);
      const OpCounts ops = ThreadOpCounts();
      // One replay per row, and the prefill's.
      EXPECT_EQ(rows->stats.graph_replays, grid + 1);
      EXPECT_EQ(ops.graph_replays - ops_before.graph_replays, grid + 1);
      EXPECT_EQ(rows->stats.host_syncs, grid) << "one read per row";
      EXPECT_EQ(rows->stats.target_forward_passes, eager->stats.target_forward_passes + 1)
          << "a row feeds its last token too";
      const double per_row =
          static_cast<double>(rows->stats.dispatched_ops) / static_cast<double>(grid);
      std::cout << "[rows] temperature " << temperature << ": " << rows->stats.graph_replays
                << " replays, " << rows->stats.dispatched_ops << " operators outside graphs ("
                << per_row << " per row), " << rows->stats.kernel_ops << " kernels\n";
      if (rows->tokens != eager->tokens) {
        ++mismatches;
        std::cout << "[rows] temperature " << temperature << ", prompt " << prompt
                  << ": tokens differ\n";
      } else if (prompt == 0) {
        break;
      }
    }
    EXPECT_LE(mismatches, temperature == 0.0 ? 0 : 1) << "at temperature " << temperature;
  }
}

// What a row costs the host, counted around the row alone (a request's totals add its
// prefill and its random numbers, made once): one replay, one read, and the operators that
// fill the graph's inputs and copy its outputs out.
TEST(RowGraphsTest, ARowCostsOneReplayOneReadAndAtMostTenOperators) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  const TokenModel& target = *family->target;
  for (double temperature : {0.0, 1.0}) {
    const DecodeRequest request = ArRequest(*family, 0, temperature);
    auto reservation = Reserve(*pools, *family, request);
    ASSERT_NE(reservation, nullptr);
    auto cache = reservation->Take(&target, 2);
    ASSERT_TRUE(cache.has_value());
    auto embedded = target.EmbedCondition(request.condition, /*with_null=*/true);
    ASSERT_OK(embedded);
    auto prefill = target.Prefill(*cache, *embedded, LogitsMode::kLast);
    ASSERT_OK(prefill);
    RowGraphs* rows = RowGraphs::Of(*cache);
    ASSERT_NE(rows, nullptr);
    const int64_t grid = target.grid_size();
    const torch::Tensor uniforms =
        temperature == 0.0 ? torch::Tensor() : torch::rand({grid * grid}, torch::kFloat64);
    RowGraphs::Call call;
    call.cache = &*cache;
    call.logits = prefill->logits.select(1, 0);
    call.sampling = request.sampling;
    call.last_position = target.TokenPosition(cache->length(), grid * grid - 2);
    const OpCounts before = ThreadOpCounts();
    int64_t reads = 0;
    {
      OpCounting counting;
      for (int64_t row = 0; row < grid; ++row) {
        call.first_position = target.TokenPosition(cache->length() - row * grid, row * grid);
        if (uniforms.defined()) call.uniforms = uniforms.narrow(0, row * grid, grid);
        const int64_t reads_before = HostReadCount();
        auto out = rows->Run({call});
        ASSERT_OK(out);
        reads += HostReadCount() - reads_before;
        ASSERT_EQ(static_cast<int64_t>((*out)[0].tokens.size()), grid);
        call.logits = (*out)[0].logits;
      }
    }
    const OpCounts after = ThreadOpCounts();
    const double dispatched = static_cast<double>(after.dispatched - before.dispatched) / grid;
    const double kernels = static_cast<double>(after.kernels - before.kernels) / grid;
    std::cout << "[rows] temperature " << temperature << ": per row " << dispatched
              << " operators dispatched, " << kernels << " kernels, "
              << static_cast<double>(after.graph_replays - before.graph_replays) / grid
              << " replays, " << static_cast<double>(reads) / grid << " reads\n";
    EXPECT_EQ(after.graph_replays - before.graph_replays, grid);
    EXPECT_EQ(reads, grid);
    EXPECT_LE(dispatched, 10.0);
    EXPECT_EQ(cache->length(), target.condition_shape().rows + grid * grid);
  }
}

TEST(RowGraphsTest, RowsOfRequestsWithDifferentSamplingShareOneReplay) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 4);
  ASSERT_NE(pools, nullptr);
  // Two filter by top-k or top-p: the batch replays the filtered graphs, which leave the
  // others' draws bit for bit as their unfiltered graphs make them alone.
  const std::vector<DecodeRequest> requests = {
      ArRequest(*family, 0, 1.0), ArRequest(*family, 1, 0.0),
      ArRequest(*family, 2, 0.7, 2.0, /*top_k=*/40),
      ArRequest(*family, 3, 1.3, 6.0, /*top_k=*/0, /*top_p=*/0.8)};
  std::vector<std::vector<int32_t>> alone;
  for (const DecodeRequest& request : requests) {
    auto reservation = Reserve(*pools, *family, request);
    ASSERT_NE(reservation, nullptr);
    auto own = DecodeAr(*family, request, nullptr, reservation.get());
    ASSERT_OK(own);
    alone.push_back(own->tokens);
  }
  const PoolGraphs::Counts before = pools->graph_counts();
  EngineLoop loop({/*max_rows=*/256, PackedGemms::kPerSequence});
  std::vector<StatusOr<DecodeResult>> results(requests.size(), InternalError("not run"));
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < requests.size(); ++i) {
    tasks.push_back([&, i] {
      auto reservation = Reserve(*pools, *family, requests[i]);
      if (reservation == nullptr) return;
      results[i] = DecodeAr(*family, requests[i], &loop, reservation.get());
    });
  }
  EngineLoop::ListSource source(std::move(tasks), 4);
  ASSERT_OK(loop.Serve(source));
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << "request " << i;
  }
  const PoolGraphs::Counts after = pools->graph_counts();
  const int64_t grid = family->target->grid_size();
  const int64_t replays = after.replays - before.replays, calls = after.calls - before.calls;
  std::cout << "[rows] 4 requests in one loop: " << replays << " replays carried " << calls
            << " calls\n";
  // Each request: a prefill and `grid` rows. All four rows in one replay, each row step.
  EXPECT_EQ(calls, 4 * (grid + 1));
  EXPECT_LE(replays, 2 * (grid + 1));
  EXPECT_GE(loop.counters().max_calls, 4);
}

TEST(RowGraphsTest, FilteredRequestsRunTheirRowsInFilteredGraphs) {
  const ModelSet& plain = testing::SynthFamily();
  const auto emulated = Emulated();
  ASSERT_NE(emulated, nullptr);
  auto pools = Pools(*emulated, 1);
  ASSERT_NE(pools, nullptr);
  const int64_t grid = emulated->target->grid_size();
  struct Filter {
    int64_t top_k;
    double top_p;
  };
  for (const Filter filter : {Filter{50, 1.0}, Filter{0, 0.9}, Filter{200, 0.7}}) {
    // Sampled: prompt 0, or if a rounding flip changed it, both of 1 and 2 (as above).
    int mismatches = 0;
    for (int prompt : {0, 1, 2}) {
      const DecodeRequest request =
          ArRequest(*emulated, prompt, 1.0, 0, filter.top_k, filter.top_p);
      auto reservation = Reserve(*pools, *emulated, request);
      ASSERT_NE(reservation, nullptr);
      auto rows = DecodeAr(*emulated, request, nullptr, reservation.get());
      ASSERT_OK(rows);
      auto eager = DecodeAr(plain, request);
      ASSERT_OK(eager);
      EXPECT_EQ(rows->stats.graph_replays, grid + 1) << "a row per replay, and the prefill's";
      EXPECT_EQ(rows->stats.host_syncs, grid);
      // The control: the same request unfiltered draws other tokens.
      auto unfiltered = DecodeAr(plain, ArRequest(*emulated, prompt, 1.0));
      ASSERT_OK(unfiltered);
      EXPECT_NE(unfiltered->tokens, eager->tokens) << "top_k " << filter.top_k;
      if (rows->tokens != eager->tokens) {
        ++mismatches;
        std::cout << "[rows] top_k " << filter.top_k << ", top_p " << filter.top_p
                  << ", prompt " << prompt << ": tokens differ\n";
      } else if (prompt == 0) {
        break;
      }
    }
    EXPECT_LE(mismatches, 1) << "top_k " << filter.top_k << ", top_p " << filter.top_p;
  }
}

TEST(RowGraphsTest, UnguidedRequestsStepTokenByToken) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  const int64_t tokens = family->target->num_image_tokens();
  const DecodeRequest request = ArRequest(*family, 0, 1.0, 1.0);
  auto reservation = Reserve(*pools, *family, request);
  ASSERT_NE(reservation, nullptr);
  auto pooled = DecodeAr(*family, request, nullptr, reservation.get());
  ASSERT_OK(pooled);
  auto eager = DecodeAr(testing::SynthFamily(), request);
  ASSERT_OK(eager);
  // The prefill and every fed token replay the pool's forward graphs.
  EXPECT_EQ(pooled->stats.graph_replays, tokens);
  EXPECT_EQ(pooled->tokens.size(), eager->tokens.size());
}

TEST(RowGraphsTest, ACallThatDoesNotFitIsRefused) {
  const auto family = Emulated();
  ASSERT_NE(family, nullptr);
  auto pools = Pools(*family, 1);
  ASSERT_NE(pools, nullptr);
  const DecodeRequest request = ArRequest(*family, 0, 1.0);
  auto reservation = Reserve(*pools, *family, request);
  ASSERT_NE(reservation, nullptr);
  auto cache = reservation->Take(family->target.get(), 2);
  ASSERT_TRUE(cache.has_value());
  RowGraphs* rows = RowGraphs::Of(*cache);
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->tokens(), family->target->grid_size());
  SamplingParams filtered = request.sampling;
  filtered.top_p = 0.9;
  EXPECT_TRUE(rows->Fits(*cache, request.sampling));
  EXPECT_TRUE(rows->Fits(*cache, filtered));
  // A row past the slot's end does not fit.
  const int64_t full = cache->capacity() - 1;
  cache->Advance(full);
  EXPECT_FALSE(rows->Fits(*cache, request.sampling));
  RowGraphs::Call call;
  call.cache = &*cache;
  call.logits = torch::zeros({2, family->target->vocab_size()});
  call.sampling = filtered;
  auto ran = rows->Run({call});
  EXPECT_EQ(ran.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->length(), full) << "a refused row moves nothing";
  // An unpooled cache has no row graphs.
  EXPECT_EQ(RowGraphs::Of(family->target->NewCache(2, 16)), nullptr);
}

}  // namespace
}  // namespace mulo::engine
