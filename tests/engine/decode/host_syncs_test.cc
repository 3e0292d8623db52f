// Stats::host_syncs counts the decode path's device -> host reads (engine/core/host_read.h),
// the host synchronisations of a GPU run: AR pays exactly one per row of the grid (its tokens),
// speculative decoding and MuLo-SD a known handful per verify step. An added or a missed read
// fails here.
#include <gtest/gtest.h>

#include "engine/core/host_read.h"
#include "engine/core/op_count.h"
#include "engine/decode/ar.h"
#include "engine/decode/eagle.h"
#include "engine/decode/lantern.h"
#include "engine/decode/peanut.h"
#include "engine/decode/mulo.h"
#include "engine/decode/sjd.h"
#include "engine/decode/speculative.h"
#include "engine/decode/zipar.h"
#include "engine/sampling/latent_neighbors.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadMuloTiny;
using testing::LoadSd;
using testing::RunMethod;
using testing::Sampling;
using testing::SdFixture;

TEST(HostReadTest, EveryHelperCountsOneRead) {
  const torch::Tensor t = torch::arange(4, torch::kInt64);
  const int64_t before = HostReadCount();
  EXPECT_EQ(ItemOf<int64_t>(t.max()), 3);
  EXPECT_TRUE(HostRead(t).equal(t));
  EXPECT_EQ(HostRead(t, torch::kFloat64).scalar_type(), torch::kFloat64);
  EXPECT_EQ(HostReadCount() - before, 3);
}

// Stats::dispatched_ops and kernel_ops stay 0 unless the caller counts operators; counted,
// every AR step dispatches operators, and kernels are a part of them.
TEST(HostSyncsTest, OperatorsAreCountedOnlyWhenAsked) {
  SdFixture f = LoadSd();
  auto quiet = RunMethod(ArDecoder(), f, Sampling(1.0, 2.0, 7));
  ASSERT_OK(quiet);
  EXPECT_EQ(quiet->stats.dispatched_ops, 0);
  EXPECT_EQ(quiet->stats.kernel_ops, 0);
  OpCounting counting;
  auto counted = RunMethod(ArDecoder(), f, Sampling(1.0, 2.0, 7));
  ASSERT_OK(counted);
  EXPECT_EQ(counted->tokens, quiet->tokens) << "counting changes nothing";
  EXPECT_GE(counted->stats.kernel_ops, 10 * counted->stats.tokens);
  EXPECT_GT(counted->stats.dispatched_ops, counted->stats.kernel_ops);
}

// The prefill reads nothing (its inputs are built on the host); AR draws on the device and
// reads each row of the grid once, when it commits and streams it.
TEST(HostSyncsTest, ArReadsOncePerRow) {
  SdFixture f = LoadSd();
  const int64_t grid = f.models.target->grid_size();
  for (const SamplingParams& s : {Sampling(1.0, 1.0, 7), Sampling(1.0, 2.0, 8),
                                  Sampling(0.0, 2.0, 9)}) {
    auto ar = RunMethod(ArDecoder(), f, s);
    ASSERT_OK(ar);
    ASSERT_GT(grid, 1);
    EXPECT_EQ(ar->stats.host_syncs, ar->stats.tokens / grid)
        << "temperature " << s.temperature << " cfg " << s.cfg_scale;
  }
}

// Token 0 is drawn from the prefill's logits before the first step (1 read). Then two reads per
// verify step: the drafts, drawn and fed back on the device, read once; and the verdict: p and
// q stay on the device, where the chain is judged and the residual or bonus drawn (before
// issue 40: one read per draft, then p, q, the residual's mass and the draw).
TEST(HostSyncsTest, SpeculativeReadsAHandfulPerVerifyStep) {
  SdFixture f = LoadSd();
  for (int64_t gamma : {1, 3, 5}) {
    for (const SamplingParams& s : {Sampling(1.0, 2.0, 11), Sampling(0.0, 2.0, 12)}) {
      auto sd = RunMethod(SpeculativeDecoder({gamma}), f, s);
      ASSERT_OK(sd);
      const Stats& st = sd->stats;
      ASSERT_GT(st.verify_steps, 0);
      EXPECT_EQ(st.host_syncs, 1 + 2 * st.verify_steps)
          << "gamma " << gamma << " " << st.ToString();
    }
  }
}

// SJD: token 0 (1 read), then per Jacobi step the verdict of the chain judged on the device
// and, when positions remain past the new prefix, the window's redrawn tokens, drawn in one
// batch: at most two reads (before: p, q, the residual and one per redrawn position, about
// 16 per step at window 16).
TEST(HostSyncsTest, SjdReadsTwicePerStep) {
  SdFixture f = LoadSd();
  for (const SamplingParams& s : {Sampling(1.0, 2.0, 31), Sampling(0.0, 2.0, 32)}) {
    SjdOptions o;
    o.window = 4;
    auto sjd = RunMethod(SjdDecoder(o), f, s);
    ASSERT_OK(sjd);
    const Stats& st = sjd->stats;
    ASSERT_GT(st.verify_steps, 1);
    EXPECT_LE(st.host_syncs, 1 + 2 * st.verify_steps) << st.ToString();
    EXPECT_GT(st.host_syncs, 1 + st.verify_steps) << st.ToString();  // some windows redrawn
  }
}

// A chain drafted by the target itself is always kept: 15 tokens after the first in 3 steps of
// 4 drafts + 1 bonus, each step reading its drafts once and the verdict (kept length, bonus).
TEST(HostSyncsTest, SelfDraftedChainReadsItsBonus) {
  SdFixture f = LoadSd();
  f.models.chain = f.models.target;
  auto sd = RunMethod(SpeculativeDecoder({4}), f, Sampling(1.0, 1.0, 3));
  ASSERT_OK(sd);
  ASSERT_EQ(sd->stats.verify_steps, 3);
  EXPECT_EQ(sd->stats.host_syncs, 1 + 3 * 2);
}

// MuLo-SD on mulo_tiny (a 4x4 drafter, an 8x8 target), per verify step: one read brings the
// drafter's new rows (drawn and fed back on the device), U_2's drafts (up-sampled from them on
// the device) and the verifier's pooled and own probabilities together (before: three reads);
// then the re-sampled tokens, and D_2's ids (1) in the steps whose committed rows need a
// down-sampled prefix (never with the drafter's own tokens as the prefix; with the down-sampled
// prefix, every step, the last one included). Re-sampling in raster order (the paper's) reads
// each token but the first (which comes from the verify forward) after a forward of its own;
// from the verify forward (the family default) a step's re-sampled tokens are read together,
// once: two reads per step with the drafter's own prefix.
TEST(HostSyncsTest, MuloReadsAFewTimesPerVerifyStep) {
  SdFixture f = LoadMuloTiny();
  for (const DraftPrefix prefix : {DraftPrefix::kOwn, DraftPrefix::kDownsampled}) {
    for (const double tau : {0.0, 1e-3, 1.5}) {
      for (const SamplingParams& s : {Sampling(1.0, 2.0, 21), Sampling(0.0, 2.0, 22)}) {
        MuloOptions o;
        o.tau = tau;
        o.prefix = prefix;
        auto mulo = RunMethod(MuloDecoder(o), f, s);
        ASSERT_OK(mulo);
        const Stats& st = mulo->stats;
        ASSERT_GT(st.verify_steps, 0);
        const int64_t down_reads = prefix == DraftPrefix::kOwn ? 0 : st.verify_steps;
        EXPECT_EQ(st.host_syncs, st.verify_steps + st.resampled_tokens + down_reads)
            << DraftPrefixName(prefix) << " tau " << tau << " temperature " << s.temperature
            << " " << st.ToString();
        // From the verify forward: at most one read of re-sampled tokens per step, exactly one
        // when every position is re-sampled (tau > 1).
        o.resample = ResampleOrder::kParallel;
        o.parallel_radius = 0;
        auto parallel = RunMethod(MuloDecoder(o), f, s);
        ASSERT_OK(parallel);
        const Stats& pt = parallel->stats;
        const int64_t fixed =
            pt.verify_steps + (prefix == DraftPrefix::kOwn ? 0 : pt.verify_steps);
        EXPECT_LE(pt.host_syncs, fixed + pt.verify_steps) << pt.ToString();
        EXPECT_GE(pt.host_syncs, fixed + (pt.resampled_tokens > 0 ? 1 : 0)) << pt.ToString();
        if (tau > 1.0) {
          EXPECT_EQ(pt.host_syncs, fixed + pt.verify_steps) << pt.ToString();
        }
      }
    }
  }
}

// The tree methods (EAGLE-1 / EAGLE-2, LANTERN, LANTERN++, PEANUT): token 0 (1 read), then per
// verify step the finished tree, grown on the device, read once, and the verdict (p and q
// together) once; the last step, with no room for a tree, reads only its verdict. EAGLE-2 and
// PEANUT (lossless, deterministic trees) verify on the device and read the tree with its
// verdict: one read per step. Before: one read of the head's distribution per tree depth, and
// a relaxed verifier read the neighbour table at every pooled rejection (EAGLE-2 8.9, LANTERN
// 15.5 reads per step).
TEST(HostSyncsTest, TreeMethodsReadTheirTreeAndVerdictOnce) {
  SdFixture f = LoadSd();
  // sd_tiny's 16 codes on a line, as lantern_test gives them.
  f.models.neighbors = std::make_shared<LatentNeighbors>(
      LatentNeighbors::Build(torch::arange(16, torch::kFloat32).view({16, 1}), 15));
  EagleOptions eagle1;
  eagle1.static_tree = true;
  LanternOptions lantern;
  lantern.k = 8;
  lantern.delta = 0.2;
  LanternPlusPlusOptions lantern_plus_plus;
  lantern_plus_plus.k = 4;
  lantern_plus_plus.lambda = 3;
  std::vector<std::unique_ptr<DecodingMethod>> methods;
  methods.push_back(std::make_unique<EagleDecoder>(eagle1));
  methods.push_back(std::make_unique<EagleDecoder>(EagleOptions()));
  methods.push_back(std::make_unique<LanternDecoder>(lantern));
  methods.push_back(std::make_unique<LanternPlusPlusDecoder>(lantern_plus_plus));
  methods.push_back(std::make_unique<PeanutDecoder>(PeanutMethodOptions()));
  for (const auto& method : methods) {
    for (const SamplingParams& s : {Sampling(1.0, 2.0, 41), Sampling(0.0, 2.0, 42)}) {
      auto run = RunMethod(*method, f, s);
      ASSERT_OK(run);
      const Stats& st = run->stats;
      ASSERT_GT(st.verify_steps, 1);
      const bool one_read = method == methods[1] || method->name() == "peanut";
      const int64_t per_step = one_read ? 1 : 2;
      EXPECT_LE(st.host_syncs, 1 + per_step * st.verify_steps)
          << method->name() << " " << st.ToString();
      EXPECT_GE(st.host_syncs, per_step * st.verify_steps)
          << method->name() << " " << st.ToString();
      if (method->name() == "lantern" && s.temperature > 0) {
        EXPECT_GT(st.pooled_drafts, 0) << "the relaxation ran";
      }
    }
  }
}

// ZipAR: token 0 from the prefill (1 read), then each forward's tokens, one per open row, drawn
// on the device together and read once (before: one read per token, 16 per image here).
TEST(HostSyncsTest, ZipArReadsOncePerForward) {
  SdFixture f = LoadSd();
  const int64_t grid = f.models.target->grid_size();
  for (const int64_t window : {int64_t{1}, int64_t{2}, grid}) {
    for (const SamplingParams& s : {Sampling(1.0, 2.0, 51), Sampling(0.0, 2.0, 52)}) {
      ZipArOptions options;
      options.window = window;
      auto zipar = RunMethod(ZipArDecoder(options), f, s);
      ASSERT_OK(zipar);
      const Stats& st = zipar->stats;
      ASSERT_EQ(st.tokens, grid * grid);
      EXPECT_LE(st.host_syncs, 1 + st.verify_steps) << "window " << window << " " << st.ToString();
      // Every forward but the last draws (the image's last token feeds nothing).
      EXPECT_GE(st.host_syncs, st.verify_steps) << "window " << window << " " << st.ToString();
      if (window < grid) {
        EXPECT_LT(st.host_syncs, st.tokens) << "rows drawn together, window " << window;
      }
    }
  }
}

}  // namespace
}  // namespace mulo::engine
