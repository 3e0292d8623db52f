// The fused decode ops (engine/kernels/fused_ops.h, issue 63) on the CPU, where each op runs its
// reference: a family loaded with LoadOptions::fused_kernels routes every forward through a
// cache by Block::ForwardFused, and
//   - every method decodes the unfused family's tokens bit for bit, eagerly (appends at the
//     cache's length, causal masks, trees' masks);
//   - requests stepping together in one loop over pools with emulated graphs keep the unfused
//     tokens (rows per stream, slot-indexed views, per-stream masks and rotary rows);
//   - a call that demands the kernel is refused where the build has none.
// What each kernel computes against its reference runs on a GPU (tests/gpu/gpu_engine_test).
#include <memory>
#include <string>
#include <vector>

#include "engine/core/op_count.h"
#include "engine/decode/method_registry.h"
#include "engine/kernels/fused_ops.h"
#include "engine/model/model_set.h"
#include "gtest/gtest.h"
#include "tests/engine/decode/pooled_decode.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

std::shared_ptr<const ModelSet> FusedFamily(bool emulate_cuda_graphs) {
  LoadOptions options;
  options.fused_kernels = true;
  options.emulate_cuda_graphs = emulate_cuda_graphs;
  return testing::LoadSynthFamily(options);
}

TEST(FusedPathTest, EveryMethodDecodesTheUnfusedTokens) {
  const ModelSet& plain = testing::SynthFamily();
  const auto fused = FusedFamily(/*emulate_cuda_graphs=*/false);
  ASSERT_NE(fused, nullptr);
  int jobs = 0;
  for (const testing::SynthJob& job : testing::EveryMethodTwice(plain)) {
    NullProgressSink sink;
    CancelToken cancel;
    auto want = testing::DecodeSynthJob(job, plain, nullptr, nullptr, cancel, sink);
    auto got = testing::DecodeSynthJob(job, *fused, nullptr, nullptr, cancel, sink);
    ASSERT_OK(want);
    ASSERT_OK(got);
    EXPECT_EQ(got->tokens, want->tokens) << job.method << " at temperature " << job.temperature;
    EXPECT_EQ(got->stats.target_forward_passes, want->stats.target_forward_passes) << job.method;
    ++jobs;
  }
  EXPECT_GE(jobs, 24) << "every method, greedy and sampled";
}

// `methods` decoding three requests (greedy, sampled, sampled) stepping together in one loop
// over the pools of the emulated family and of the fused one: the same tokens, from graphs.
void ExpectLoopsAgree(const std::vector<std::string>& methods) {
  const auto plain = testing::EmulatedSynthFamily();
  const auto fused = FusedFamily(/*emulate_cuda_graphs=*/true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(fused, nullptr);
  constexpr int kRequests = 3;
  auto plain_pools = testing::SynthPools(*plain, kRequests);
  auto fused_pools = testing::SynthPools(*fused, kRequests);
  ASSERT_NE(plain_pools, nullptr);
  ASSERT_NE(fused_pools, nullptr);
  for (const std::string& method : methods) {
    std::vector<DecodeRequest> requests;
    for (int prompt = 0; prompt < kRequests; ++prompt) {
      requests.push_back(testing::SynthRequest({method, prompt, prompt == 0 ? 0.0 : 1.0}, *plain));
    }
    auto config = DefaultMethodConfig(method, *plain);
    ASSERT_OK(config);
    auto want = testing::DecodeInOneLoop(*config, *plain, *plain_pools, requests);
    const int64_t replays_before = ThreadOpCounts().graph_replays;
    auto got = testing::DecodeInOneLoop(*config, *fused, *fused_pools, requests);
    ASSERT_OK(want);
    ASSERT_OK(got);
    EXPECT_GT(ThreadOpCounts().graph_replays, replays_before) << method << " replayed no graph";
    for (int i = 0; i < kRequests; ++i) {
      EXPECT_EQ((*got)[i].tokens, (*want)[i].tokens) << method << ", request " << i;
    }
  }
}

// ar's rows and SJD's windows.
TEST(FusedPathTest, ArAndSjdInOneLoopKeepTheUnfusedTokens) { ExpectLoopsAgree({"ar", "sjd"}); }

// MuLo-SD's drafter and pooled verification; EAGLE-2's trees.
TEST(FusedPathTest, MuloAndEagleInOneLoopKeepTheUnfusedTokens) {
  ExpectLoopsAgree({"mulo", "eagle"});
}

TEST(FusedPathTest, DemandingAKernelThatIsNotBuiltIsRefused) {
  if (FusedKernelsBuilt()) GTEST_SKIP() << "this build has the kernels (tests/gpu runs them)";
  const torch::Tensor residual = torch::randn({2, 1, 8}), in = torch::randn({2, 1, 4});
  const torch::Tensor weight = torch::randn({8, 4});
  const torch::Tensor want = residual + torch::linear(in, weight);
  EXPECT_TRUE(torch::equal(LinearResidual(residual, in, weight), want)) << "kAuto: the reference";
  EXPECT_TRUE(torch::equal(LinearResidual(residual, in, weight, FusedImpl::kReference), want));
  try {
    LinearResidual(residual, in, weight, FusedImpl::kKernel);
    ADD_FAILURE() << "kKernel ran without kernels";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("LinearResidual: the fused kernel cannot run this call "
                                         "(not built)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mulo::engine
