// MuLo-SD reduces to its limits: with tau > 1 nothing is accepted and the target re-samples
// every position in raster order, which is AR (same seed, same tokens) for every drafter
// prefix, pooling and drafter guidance; with tau = 0 everything is accepted and the tokens
// are U_2 of the drafter's (for the prefixes that keep its own tokens, U_2 of one whole
// drafter sample, at the drafter's own guidance). The pooling reductions (lambda 1 and k 0
// are no pooling), local expansion, validation, cancellation and the per-request counters.
#include <gtest/gtest.h>

#include "engine/decode/ar.h"
#include "engine/decode/local_expansion.h"
#include "engine/decode/mulo.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using MuloFixture = testing::SdFixture;

MuloFixture LoadMulo() { return testing::LoadMuloTiny(); }

StatusOr<DecodeResult> Generate(const DecodingMethod& method, const ModelSet& models,
                                const Condition& condition, const SamplingParams& sampling) {
  NullProgressSink sink;
  CancelToken cancel;
  return method.Decode(DecodeRequest{condition, sampling}, models, sink, cancel);
}

constexpr DraftPrefix kAllPrefixes[] = {DraftPrefix::kDownsampled, DraftPrefix::kKeepDrafted,
                                        DraftPrefix::kPatch, DraftPrefix::kOwn};

TEST(MuloTest, TauAboveOneIsArForTheSameSeedWhateverTheDrafter) {
  MuloFixture f = LoadMulo();
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed : {1, 2, 3}) {
      SamplingParams s;
      s.temperature = temperature;
      s.seed = seed;
      auto ar = Generate(ArDecoder(), f.models, f.condition, s);
      ASSERT_OK(ar);
      for (DraftPrefix prefix : kAllPrefixes) {
        for (Rejection mode : {Rejection::kLocal, Rejection::kRaster}) {
          MuloOptions o;
          o.tau = 1.5;
          o.rejection = mode;
          o.prefix = prefix;
          if (seed == 2) o.draft_cfg_scale = 2.0;  // the drafter's guidance changes nothing
          if (seed == 3) o.pooling.kind = Pooling::kMultiplicative;
          auto mulo = Generate(MuloDecoder(o), f.models, f.condition, s);
          ASSERT_OK(mulo);
          EXPECT_EQ(mulo->tokens, ar->tokens) << "temperature " << temperature << " seed "
                                              << seed << " prefix " << DraftPrefixName(prefix);
          EXPECT_EQ(mulo->stats.accepted_tokens, 0);
          EXPECT_EQ(mulo->stats.resampled_tokens, 64);
          EXPECT_EQ(mulo->stats.drafted_tokens, 64);
          EXPECT_EQ(mulo->stats.prefix_own_tokens + mulo->stats.prefix_downsampled_tokens, 16);
        }
      }
    }
  }
}

// Re-sampling every position costs the target one forward per position after each step's
// first, and the tokens after the last one ride in the next verify forward: prefill + 4
// verify forwards + 4 x 15 re-sampling forwards.
TEST(MuloTest, SequentialResamplingFeedsTheTailInTheNextVerifyForward) {
  MuloFixture f = LoadMulo();
  MuloOptions o;
  o.tau = 1.5;
  auto r = Generate(MuloDecoder(o), f.models, f.condition, SamplingParams());
  ASSERT_OK(r);
  EXPECT_EQ(r->stats.verify_steps, 4);
  EXPECT_EQ(r->stats.target_forward_passes, 1 + 4 + 4 * 15);
}

// Parallel re-sampling with a reach of 1 or more re-samples a position whose left neighbour
// was re-sampled sequentially, so when every position is rejected it is ar; with a reach
// covering the grid it is the paper's sequential re-sampling at any tau; with reach 0 the
// target runs exactly one forward per step.
TEST(MuloTest, ParallelResamplingReducesToSequential) {
  MuloFixture f = LoadMulo();
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed : {1, 2, 3}) {
      SamplingParams s;
      s.temperature = temperature;
      s.seed = seed;
      auto ar = Generate(ArDecoder(), f.models, f.condition, s);
      ASSERT_OK(ar);
      MuloOptions o;
      o.tau = 1.5;
      o.resample = ResampleOrder::kParallel;
      o.parallel_radius = seed;  // 1, 2, 3: all reach the left neighbour
      o.prefix = DraftPrefix::kOwn;
      auto all_rejected = Generate(MuloDecoder(o), f.models, f.condition, s);
      ASSERT_OK(all_rejected);
      EXPECT_EQ(all_rejected->tokens, ar->tokens) << temperature << " " << seed;

      o.tau = 0.05;
      o.radius = 1;
      o.parallel_radius = 8;  // the 8 x 8 grid: every earlier re-sample is within reach
      auto parallel = Generate(MuloDecoder(o), f.models, f.condition, s);
      o.resample = ResampleOrder::kSequential;
      auto sequential = Generate(MuloDecoder(o), f.models, f.condition, s);
      ASSERT_OK(parallel);
      ASSERT_OK(sequential);
      EXPECT_EQ(parallel->tokens, sequential->tokens) << temperature << " " << seed;
      EXPECT_EQ(parallel->stats.target_forward_passes, sequential->stats.target_forward_passes);
      EXPECT_GT(sequential->stats.resampled_tokens, 4);  // the reduction is not vacuous

      o.resample = ResampleOrder::kParallel;
      o.parallel_radius = 0;
      for (double tau : {0.05, 1.5}) {
        o.tau = tau;
        auto one_pass = Generate(MuloDecoder(o), f.models, f.condition, s);
        ASSERT_OK(one_pass);
        EXPECT_EQ(one_pass->stats.target_forward_passes, 1 + one_pass->stats.verify_steps);
        EXPECT_GT(one_pass->stats.resampled_tokens, 0);
      }
    }
  }
}

TEST(MuloTest, TauZeroIsTheUpsampledDrafter) {
  MuloFixture f = LoadMulo();
  SamplingParams greedy;
  greedy.temperature = 0.0;
  // The drafter alone, greedy, at its own 4x4 resolution.
  ModelSet drafter_only = f.models;
  drafter_only.target = f.models.drafter;
  auto low = Generate(ArDecoder(), drafter_only, f.condition, greedy);
  ASSERT_OK(low);
  auto low_ids = torch::tensor(std::vector<int64_t>(low->tokens.begin(), low->tokens.end()),
                               torch::kInt64)
                     .unsqueeze(0);
  auto up = f.models.upsampler->Apply(low_ids, 4, 4);
  ASSERT_OK(up);
  MuloOptions o;
  o.tau = 0.0;
  o.draft_rows = 4;  // the whole low-resolution image in one draft
  auto mulo = Generate(MuloDecoder(o), f.models, f.condition, greedy);
  ASSERT_OK(mulo);
  auto flat = up->flatten();
  EXPECT_EQ(mulo->tokens,
            std::vector<int32_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + 64));
  EXPECT_EQ(mulo->stats.accepted_tokens, 64);
  EXPECT_EQ(mulo->stats.resampled_tokens, 0);
  EXPECT_EQ(mulo->stats.target_forward_passes, 2);  // prefill + the one verify forward
  // Row by row, tau = 0 still accepts everything and never calls the target to re-sample.
  o.draft_rows = 1;
  auto rowwise = Generate(MuloDecoder(o), f.models, f.condition, greedy);
  ASSERT_OK(rowwise);
  EXPECT_EQ(rowwise->stats.accepted_tokens, 64);
  EXPECT_EQ(rowwise->stats.verify_steps, 4);
  // Keeping the drafter's own tokens (by row, by r x r block, always), row by row gives
  // exactly the whole-image draft: the drafter never sees D_r's version of its rows.
  for (DraftPrefix prefix : {DraftPrefix::kKeepDrafted, DraftPrefix::kPatch, DraftPrefix::kOwn}) {
    o.prefix = prefix;
    auto kept = Generate(MuloDecoder(o), f.models, f.condition, greedy);
    ASSERT_OK(kept);
    EXPECT_EQ(kept->tokens, mulo->tokens) << DraftPrefixName(prefix);
    EXPECT_EQ(kept->stats.verify_steps, 4);
    EXPECT_EQ(kept->stats.draft_forward_passes, 16);  // prefill + one feed per drafted token
    EXPECT_EQ(kept->stats.prefix_own_tokens, 16);
    EXPECT_EQ(kept->stats.prefix_downsampled_tokens, 0);
    EXPECT_EQ(kept->stats.phase_seconds[static_cast<int>(Phase::kDownsample)], 0.0);
  }
  o.prefix = DraftPrefix::kDownsampled;
  auto paper = Generate(MuloDecoder(o), f.models, f.condition, greedy);
  ASSERT_OK(paper);
  EXPECT_EQ(paper->stats.prefix_downsampled_tokens, 16);
}

TEST(MuloTest, TheDrafterSamplesAtItsOwnGuidance) {
  MuloFixture f = LoadMulo();
  for (double request_cfg : {1.0, 4.0}) {  // 1: the target runs one stream, the drafter two
    SamplingParams greedy;
    greedy.temperature = 0.0;
    greedy.cfg_scale = request_cfg;
    MuloOptions o;
    o.tau = 0.0;
    o.prefix = DraftPrefix::kOwn;
    o.draft_cfg_scale = 2.5;
    auto mulo = Generate(MuloDecoder(o), f.models, f.condition, greedy);
    ASSERT_OK(mulo);
    // U_2 of the drafter's own greedy sample at guidance 2.5.
    ModelSet drafter_only = f.models;
    drafter_only.target = f.models.drafter;
    SamplingParams drafter_greedy = greedy;
    drafter_greedy.cfg_scale = 2.5;
    auto low = Generate(ArDecoder(), drafter_only, f.condition, drafter_greedy);
    ASSERT_OK(low);
    auto up = f.models.upsampler->Apply(
        std::vector<int64_t>(low->tokens.begin(), low->tokens.end()), 4, 4);
    ASSERT_OK(up);
    EXPECT_EQ(mulo->tokens, std::vector<int32_t>(up->begin(), up->end())) << request_cfg;
  }
  // The drafter's temperature: greedy drafts under a sampling request are the same whatever
  // the seed (tau 0 keeps every draft).
  MuloOptions o;
  o.tau = 0.0;
  o.prefix = DraftPrefix::kOwn;
  o.draft_temperature = 0.0;
  SamplingParams a, b;
  a.seed = 1;
  b.seed = 2;
  auto first = Generate(MuloDecoder(o), f.models, f.condition, a);
  auto second = Generate(MuloDecoder(o), f.models, f.condition, b);
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(first->tokens, second->tokens);
  o.draft_temperature.reset();
  auto sampled_a = Generate(MuloDecoder(o), f.models, f.condition, a);
  auto sampled_b = Generate(MuloDecoder(o), f.models, f.condition, b);
  ASSERT_OK(sampled_a);
  ASSERT_OK(sampled_b);
  EXPECT_NE(sampled_a->tokens, sampled_b->tokens);
}

TEST(MuloTest, PoolingReductionsAreNoPooling) {
  MuloFixture f = LoadMulo();
  for (uint64_t seed : {4, 5, 6}) {
    SamplingParams s;
    s.seed = seed;
    MuloOptions none;
    none.tau = 0.05;
    none.radius = 1;
    none.pooling.kind = Pooling::kNone;
    auto reference = Generate(MuloDecoder(none), f.models, f.condition, s);
    ASSERT_OK(reference);
    EXPECT_EQ(reference->stats.relaxed_accepted_tokens, 0);
    MuloOptions lambda_one = none, k_zero = none;
    lambda_one.pooling.kind = Pooling::kMultiplicative;
    lambda_one.pooling.lambda = 1.0;
    k_zero.pooling.kind = Pooling::kAdditive;
    k_zero.pooling.k = 0;
    for (const MuloOptions& o : {lambda_one, k_zero}) {
      auto r = Generate(MuloDecoder(o), f.models, f.condition, s);
      ASSERT_OK(r);
      EXPECT_EQ(r->tokens, reference->tokens) << "seed " << seed;
      EXPECT_EQ(r->stats.relaxed_accepted_tokens, 0);
    }
  }
}

TEST(MuloTest, CountersAddUp) {
  MuloFixture f = LoadMulo();
  int64_t relaxed = 0, expansion = 0, own = 0, down = 0;
  for (uint64_t seed : {1, 2, 3, 4}) {
    SamplingParams s;
    s.seed = seed;
    MuloOptions o;
    o.tau = 0.05;
    o.radius = 1;
    o.prefix = DraftPrefix::kPatch;
    o.pooling.delta = 0.3;
    auto r = Generate(MuloDecoder(o), f.models, f.condition, s);
    ASSERT_OK(r);
    const Stats& st = r->stats;
    EXPECT_EQ(st.accepted_tokens + st.resampled_tokens, st.drafted_tokens);
    EXPECT_LE(st.expansion_resampled_tokens, st.resampled_tokens);
    EXPECT_EQ(st.prefix_own_tokens + st.prefix_downsampled_tokens, 16);
    relaxed += st.relaxed_accepted_tokens;
    expansion += st.expansion_resampled_tokens;
    own += st.prefix_own_tokens;
    down += st.prefix_downsampled_tokens;
  }
  // Over a few seeds every counter moves: pooling rescues some drafts, expansion re-samples
  // accepted neighbours, and the patch prefix mixes own and D_r tokens.
  EXPECT_GT(relaxed, 0);
  EXPECT_GT(expansion, 0);
  EXPECT_GT(own, 0);
  EXPECT_GT(down, 0);
}

TEST(MuloTest, KeepDraftedPrefixSavesDrafterForwardsAndIsArAboveOne) {
  MuloFixture f = LoadMulo();
  SamplingParams greedy;
  greedy.temperature = 0.0;
  MuloOptions o;
  o.tau = 0.0;
  o.prefix = DraftPrefix::kDownsampled;
  auto paper = Generate(MuloDecoder(o), f.models, f.condition, greedy);
  ASSERT_OK(paper);
  // The paper's prefix re-feeds the drafter wherever D_r(U_r(y)) != y; keeping its tokens
  // never does, so it needs no more drafter forwards.
  o.prefix = DraftPrefix::kKeepDrafted;
  auto kept = Generate(MuloDecoder(o), f.models, f.condition, greedy);
  ASSERT_OK(kept);
  EXPECT_LE(kept->stats.draft_forward_passes, paper->stats.draft_forward_passes);
  // tau > 1 re-samples everything with the target whatever the drafter saw: still AR.
  for (double temperature : {0.0, 1.0}) {
    SamplingParams s;
    s.temperature = temperature;
    s.seed = 7;
    o.tau = 1.5;
    auto mulo = Generate(MuloDecoder(o), f.models, f.condition, s);
    auto ar = Generate(ArDecoder(), f.models, f.condition, s);
    ASSERT_OK(mulo);
    ASSERT_OK(ar);
    EXPECT_EQ(mulo->tokens, ar->tokens) << "temperature " << temperature;
  }
}

TEST(MuloTest, IntermediateTauAcceptsSomeAndStreamsRowsInOrder) {
  MuloFixture f = LoadMulo();
  struct Sink : ProgressSink {
    std::vector<int64_t> firsts;
    std::vector<int32_t> tokens;
    void OnRows(int64_t first, int64_t, const std::vector<int32_t>& t) override {
      firsts.push_back(first);
      tokens.insert(tokens.end(), t.begin(), t.end());
    }
  } sink;
  CancelToken cancel;
  MuloOptions o;
  o.tau = 0.05;
  o.radius = 1;
  SamplingParams s;
  s.seed = 9;
  auto r = MuloDecoder(o).Decode(DecodeRequest{f.condition, s}, f.models, sink, cancel);
  ASSERT_OK(r);
  EXPECT_EQ(sink.tokens, r->tokens);
  for (size_t i = 1; i < sink.firsts.size(); ++i) EXPECT_GT(sink.firsts[i], sink.firsts[i - 1]);
  EXPECT_EQ(r->stats.accepted_tokens + r->stats.resampled_tokens, r->stats.drafted_tokens);
  EXPECT_EQ(r->stats.drafted_tokens, 64);
}

TEST(MuloTest, OptionsAreValidatedByName) {
  MuloFixture f = LoadMulo();
  auto expect_field = [&](MuloOptions o, const std::string& field) {
    auto r = Generate(MuloDecoder(o), f.models, f.condition, SamplingParams());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(r.status().message().rfind(field + ":", 0), 0u) << r.status().message();
  };
  MuloOptions o;
  o.tau = -1;
  expect_field(o, "mulo.tau");
  o = MuloOptions();
  o.pooling.k = -1;
  expect_field(o, "mulo.k");
  o = MuloOptions();
  o.pooling.delta = 1.5;
  expect_field(o, "mulo.delta");
  o = MuloOptions();
  o.pooling.lambda = 0.5;
  expect_field(o, "mulo.lambda");
  o = MuloOptions();
  o.draft_cfg_scale = 101;
  expect_field(o, "mulo.draft_cfg_scale");
  o = MuloOptions();
  o.draft_temperature = -1;
  expect_field(o, "mulo.draft_temperature");
  o = MuloOptions();
  o.radius = -1;
  expect_field(o, "mulo.radius");
  o = MuloOptions();
  o.draft_rows = 0;
  expect_field(o, "mulo.draft_rows");
  ModelSet no_drafter = f.models;
  no_drafter.drafter = nullptr;
  EXPECT_EQ(Generate(MuloDecoder(), no_drafter, f.condition, SamplingParams()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(MuloTest, CancelStopsTheRequest) {
  MuloFixture f = LoadMulo();
  struct Cancelling : ProgressSink {
    CancelToken* token;
    void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override { token->Cancel(); }
  } sink;
  CancelToken cancel;
  sink.token = &cancel;
  auto r = MuloDecoder().Decode(DecodeRequest{f.condition, SamplingParams()}, f.models, sink,
                                cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
}

TEST(LocalExpansionTest, RadiusZeroIsTheRejectedSet) {
  EXPECT_EQ(ExpandRejections({10, 13}, 8, 24, 8, 0, Rejection::kLocal),
            (std::vector<int64_t>{10, 13}));
  EXPECT_TRUE(ExpandRejections({}, 8, 24, 8, 3, Rejection::kLocal).empty());
}

TEST(LocalExpansionTest, NeighbourhoodsClipAtBordersAndStartAtTheFirstRejection) {
  // 8-wide grid, chunk = rows 1-2 (positions 8..23). Rejected: 8 (row 1, col 0) and 23
  // (row 2, col 7). Radius 1: around 8 -> cols 0-1 of rows 0-2, but row 0 is before t0 = 8;
  // around 23 -> cols 6-7 of rows 1-3, row 3 is outside the chunk.
  EXPECT_EQ(ExpandRejections({8, 23}, 8, 24, 8, 1, Rejection::kLocal),
            (std::vector<int64_t>{8, 9, 14, 15, 16, 17, 22, 23}));
  // Around 12 (row 1, col 4) with radius 2: positions >= 12 only on row 1, full 5 columns on
  // row 2 (cols 2-6).
  EXPECT_EQ(ExpandRejections({12}, 8, 24, 8, 2, Rejection::kLocal),
            (std::vector<int64_t>{12, 13, 14, 18, 19, 20, 21, 22}));
}

TEST(LocalExpansionTest, RasterRejectsEverythingAfterTheFirstRejection) {
  EXPECT_EQ(ExpandRejections({20, 22}, 16, 24, 8, 3, Rejection::kRaster),
            (std::vector<int64_t>{20, 21, 22, 23}));
  // Local expansion is always a subset of raster-scan rejection.
  auto local = ExpandRejections({17, 20}, 16, 32, 8, 1, Rejection::kLocal);
  auto raster = ExpandRejections({17, 20}, 16, 32, 8, 1, Rejection::kRaster);
  EXPECT_TRUE(std::includes(raster.begin(), raster.end(), local.begin(), local.end()));
  EXPECT_LT(local.size(), raster.size());
}

// The device's expansion (a step that decides before its read) marks exactly the host's
// positions: random rejection sets over chunks that start mid-row or on a row, every radius
// from 0 past the grid (a client may send 2^32 - 1), both modes; and an empty set marks none.
TEST(LocalExpansionTest, TheDevicesExpansionIsTheHosts) {
  at::manual_seed(61);
  int checked = 0;
  for (const int64_t width : {1, 5, 8, 16}) {
    for (const int64_t begin : {int64_t{0}, width, 3 * width + width / 2}) {
      for (const int64_t length : {int64_t{1}, width, 2 * width + 3, 4 * width}) {
        for (const int64_t radius : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, 2 * width,
                                     int64_t{4294967295}}) {
          for (const Rejection mode : {Rejection::kLocal, Rejection::kRaster}) {
            for (const double share : {0.0, 0.05, 0.3}) {
              const torch::Tensor rejected = torch::rand({length}) < share;
              std::vector<int64_t> host_rejected;
              for (int64_t i = 0; i < length; ++i) {
                if (rejected[i].item<bool>()) host_rejected.push_back(begin + i);
              }
              const std::vector<int64_t> host =
                  ExpandRejections(host_rejected, begin, begin + length, width, radius, mode);
              const torch::Tensor marks =
                  ExpandRejectionsOnDevice(rejected, begin, width, radius, mode);
              ASSERT_EQ(marks.scalar_type(), torch::kBool);
              ASSERT_EQ(marks.size(0), length);
              std::vector<int64_t> device;
              for (int64_t i = 0; i < length; ++i) {
                if (marks[i].item<bool>()) device.push_back(begin + i);
              }
              EXPECT_EQ(device, host) << "width " << width << " begin " << begin << " length "
                                      << length << " radius " << radius << " raster "
                                      << (mode == Rejection::kRaster);
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 3 * 4 * 6 * 2 * 3);
}

// MuLo-SD x ZipAR: with the drafter's grid width as the window the drafter's wavefront is its
// sequential drafting, token for token, for every prefix rule (OWN continues the wavefront,
// the others restart it whenever the committed rows change the prefix); smaller windows draft
// with fewer drafter forwards; the window is validated against the drafter's grid.
TEST(MuloTest, ZipArDrafterWithTheGridWidthIsTheSequentialDrafter) {
  MuloFixture f = LoadMulo();
  const int64_t small = f.models.drafter->grid_size();
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed : {1, 2}) {
      SamplingParams s;
      s.temperature = temperature;
      s.seed = seed;
      for (DraftPrefix prefix : kAllPrefixes) {
        MuloOptions o;
        o.tau = 0.02;
        o.radius = 1;
        o.prefix = prefix;
        o.draft_rows = seed;  // 1 and 2 rows per step
        auto sequential = Generate(MuloDecoder(o), f.models, f.condition, s);
        o.zipar_window = small;
        auto wavefront = Generate(MuloDecoder(o), f.models, f.condition, s);
        ASSERT_OK(sequential);
        ASSERT_OK(wavefront);
        EXPECT_EQ(wavefront->tokens, sequential->tokens)
            << temperature << " " << seed << " " << DraftPrefixName(prefix);
        EXPECT_EQ(wavefront->stats.prefix_own_tokens, sequential->stats.prefix_own_tokens);
        EXPECT_EQ(wavefront->stats.accepted_tokens, sequential->stats.accepted_tokens);
        if (prefix == DraftPrefix::kOwn) {
          // One drafter forward per drafted token but the last, as sequentially.
          EXPECT_EQ(wavefront->stats.draft_forward_passes,
                    sequential->stats.draft_forward_passes);
          o.zipar_window = 1;
          auto narrow = Generate(MuloDecoder(o), f.models, f.condition, s);
          ASSERT_OK(narrow);
          EXPECT_LT(narrow->stats.draft_forward_passes, sequential->stats.draft_forward_passes);
        }
      }
    }
  }
  MuloOptions bad;
  bad.zipar_window = small + 1;
  auto refused = Generate(MuloDecoder(bad), f.models, f.condition, SamplingParams());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("mulo.zipar_window:", 0), 0u);
}

// Wavefront re-sampling: a window of the grid width is the paper's sequential re-sampling
// draw for draw (every position waits for all earlier ones); smaller windows draw positions
// of different rows from one forward, so the target runs fewer forwards.
TEST(MuloTest, WavefrontResamplingWithTheGridWidthIsSequential) {
  MuloFixture f = LoadMulo();
  const int64_t grid = f.models.target->grid_size();
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed : {1, 2, 3}) {
      SamplingParams s;
      s.temperature = temperature;
      s.seed = seed;
      MuloOptions o;
      o.tau = seed == 3 ? 1.5 : 0.05;  // seed 3: everything re-sampled (then ar)
      o.radius = 1;
      auto sequential = Generate(MuloDecoder(o), f.models, f.condition, s);
      o.resample = ResampleOrder::kWavefront;
      o.resample_window = grid;
      auto wavefront = Generate(MuloDecoder(o), f.models, f.condition, s);
      ASSERT_OK(sequential);
      ASSERT_OK(wavefront);
      EXPECT_EQ(wavefront->tokens, sequential->tokens) << temperature << " " << seed;
      EXPECT_EQ(wavefront->stats.target_forward_passes, sequential->stats.target_forward_passes);
      if (seed == 3) {
        // All 64 positions re-sampled: each step's 16 positions (two rows of 8) need 15
        // sequential forwards; with window 2 row 2 runs beside row 1 two columns behind.
        o.resample_window = 2;
        auto narrow = Generate(MuloDecoder(o), f.models, f.condition, s);
        ASSERT_OK(narrow);
        EXPECT_LT(narrow->stats.target_forward_passes, sequential->stats.target_forward_passes);
        EXPECT_EQ(narrow->stats.resampled_tokens, 64);
      }
    }
  }
  MuloOptions bad;
  bad.resample_window = 0;
  auto refused = Generate(MuloDecoder(bad), f.models, f.condition, SamplingParams());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("mulo.resample_window:", 0), 0u);
}

TEST(MuloTest, TheoreticalSpeedup) {
  EXPECT_DOUBLE_EQ(TheoreticalSpeedup(0.0, 256, 64), 256.0 / (256 + 64));
  EXPECT_DOUBLE_EQ(TheoreticalSpeedup(1.0, 256, 64), 4.0);
  EXPECT_NEAR(TheoreticalSpeedup(0.5, 1024, 256), 1024.0 / (512 + 256), 1e-12);
}

}  // namespace
}  // namespace mulo::engine
