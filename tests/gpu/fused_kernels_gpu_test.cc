// Each fused decode kernel (engine/kernels, issue 63) against its reference, the LibTorch ops
// the block runs (fused_ops.h), on the same CUDA tensors: FusedImpl::kKernel (which refuses a
// call its kernel cannot run) against FusedImpl::kReference, in float32 (relative error
// <= 1e-5: only the order of float sums differs) and bfloat16 (<= 1e-2: a few outputs one bf16
// rounding apart). Shapes as the replicas decode: guidance streams of one to three new tokens,
// grouped-query heads, pools' slot-indexed caches, per-stream rotary rows and masks. Part of
// gpu_engine_test; every case skips without a CUDA device.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <cmath>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/kernels/fused_ops.h"

namespace mulo::engine {
namespace {

double Relative(const torch::Tensor& got, const torch::Tensor& want) {
  const auto g = got.to(torch::kCPU, torch::kFloat64), w = want.to(torch::kCPU, torch::kFloat64);
  EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << "non-finite kernel output";
  return ((g - w).norm() / w.norm()).item<double>();
}

double Tolerance(torch::ScalarType dtype) { return dtype == torch::kFloat32 ? 1e-5 : 1e-2; }

class FusedKernelsTest : public ::testing::TestWithParam<torch::ScalarType> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(FusedKernelsBuilt()) << "tools/build_engine.sh found no nvcc";
    at::globalContext().setAllowTF32CuBLAS(false);
    torch::manual_seed(5);
  }
  torch::TensorOptions Options() const { return torch::dtype(GetParam()).device(torch::kCUDA); }
  torch::Tensor Random(std::vector<int64_t> sizes, double scale = 1.0) const {
    return (torch::randn(sizes, torch::kFloat32) * scale).to(Options());
  }
  // A pool's layer: `slots` slots of `capacity` rows, filled with random keys and values.
  CacheLayer Cache(int64_t slots, int64_t kv_heads, int64_t capacity, int64_t hd) const {
    return {Random({slots, kv_heads, capacity, hd}), Random({slots, kv_heads, capacity, hd}), {}};
  }
  static CacheLayer Copy(const CacheLayer& c) {
    return {c.keys.clone(), c.values.clone(), c.slot_index};
  }
  torch::Tensor Long(std::vector<int64_t> values) const {
    return torch::tensor(values, torch::kInt64).to(torch::kCUDA);
  }
  // Rotation rows as the model's table holds them: (cos, sin) of random angles, float32.
  static torch::Tensor Rope(std::vector<int64_t> sizes) {
    sizes.push_back(2);
    const auto angles = torch::rand(std::vector<int64_t>(sizes.begin(), sizes.end() - 1)) * 6.3;
    return torch::stack({torch::cos(angles), torch::sin(angles)}, -1).to(torch::kCUDA);
  }
};

struct QkvCase {
  std::string name;
  int64_t streams, tokens, heads, kv_heads, hd;
  bool bias, rope, per_stream_rope, slot_indexed, row_index;
};

TEST_P(FusedKernelsTest, NormQkvRotaryStoreFollowsItsReference) {
  const std::vector<QkvCase> cases = {
      {"ar step, guidance pair, eager append", 2, 1, 16, 16, 128, false, true, false, false, false},
      {"Qwen2 bias, grouped heads, rows", 2, 1, 14, 2, 64, true, true, false, false, true},
      {"3 tokens per stream, pool slots", 2, 3, 8, 4, 64, false, true, true, true, true},
      {"absolute positions (no rotary)", 4, 2, 4, 4, 32, false, false, false, true, true},
  };
  for (const QkvCase& c : cases) {
    const int64_t dim = c.heads * c.hd, out = (c.heads + 2 * c.kv_heads) * c.hd;
    const auto x = Random({c.streams, c.tokens, dim});
    const auto norm = Random({dim}, 0.5) + 1.0;
    const auto wqkv = Random({out, dim}, 1.0 / std::sqrt(static_cast<double>(dim)));
    const auto bqkv = c.bias ? Random({out}, 0.1) : torch::Tensor();
    const auto rope = !c.rope             ? torch::Tensor()
                      : c.per_stream_rope ? Rope({c.streams, c.tokens, c.hd / 2})
                                          : Rope({c.tokens, c.hd / 2});
    CacheLayer cache = Cache(c.slot_indexed ? c.streams + 3 : c.streams, c.kv_heads, 64, c.hd);
    if (c.slot_indexed) {
      std::vector<int64_t> slots;
      for (int64_t b = 0; b < c.streams; ++b) slots.push_back(c.streams + 2 - b);
      cache.slot_index = Long(slots);
    }
    NewRows rows{torch::Tensor(), 9};
    if (c.row_index) {
      rows.rows = c.slot_indexed
                      ? (torch::arange(c.tokens) + 20 + torch::arange(c.streams).unsqueeze(1) * 7)
                            .to(torch::kCUDA)
                      : (torch::arange(c.tokens) + 31).to(torch::kCUDA);
    }
    const HeadLayout heads{c.heads, c.kv_heads, c.hd};
    CacheLayer want_cache = Copy(cache), got_cache = Copy(cache);
    const auto want = NormQkvRotaryStore(x, norm, 1e-5, wqkv, bqkv, rope, heads, want_cache, rows,
                                         FusedImpl::kReference);
    const auto got = NormQkvRotaryStore(x, norm, 1e-5, wqkv, bqkv, rope, heads, got_cache, rows,
                                        FusedImpl::kKernel);
    const double q_err = Relative(got, want), k_err = Relative(got_cache.keys, want_cache.keys),
                 v_err = Relative(got_cache.values, want_cache.values);
    std::cout << "[fused qkv] " << c.name << ": q " << q_err << ", keys " << k_err << ", values "
              << v_err << "\n";
    EXPECT_LE(q_err, Tolerance(GetParam())) << c.name;
    // The caches were equal before: what differs is the rows written, and only by rounding.
    EXPECT_LE(k_err, Tolerance(GetParam())) << c.name;
    EXPECT_LE(v_err, Tolerance(GetParam())) << c.name;
    EXPECT_LE(torch::ne(got_cache.keys, want_cache.keys).sum().item<int64_t>(),
              c.streams * c.tokens * c.kv_heads * c.hd)
        << c.name << ": rows outside the written ones changed";
  }
}

struct AttentionCase {
  std::string name;
  int64_t streams, tokens, heads, kv_heads, hd, span;
  int mask_dims;  // 0: none, 2: [n, span], 4: [B, 1, n, span]
  bool slot_indexed;
};

TEST_P(FusedKernelsTest, CacheAttentionFollowsItsReference) {
  const std::vector<AttentionCase> cases = {
      {"ar step over 600 rows", 2, 1, 16, 16, 128, 600, 0, false},
      {"grouped heads, causal chunk", 2, 4, 16, 4, 64, 333, 2, false},
      {"pool slots, per-stream masks", 3, 2, 8, 8, 32, 1100, 4, true},
      {"head_dim 256, a short span", 2, 1, 4, 1, 256, 40, 0, false},
  };
  for (const AttentionCase& c : cases) {
    const auto q = Random({c.streams, c.tokens, c.heads, c.hd});
    CacheLayer cache = Cache(c.slot_indexed ? c.streams + 2 : c.streams, c.kv_heads, 1200, c.hd);
    if (c.slot_indexed) cache.slot_index = Long({4, 0, 2});
    torch::Tensor mask;
    if (c.mask_dims > 0) {
      // Random holes, every query keeps its own last rows (as a causal mask does).
      const int64_t lead = c.mask_dims == 4 ? c.streams : 1;
      auto keep = torch::rand({lead, c.tokens, c.span}) > 0.3;
      keep.narrow(2, c.span - c.tokens, c.tokens).fill_(true);
      mask = torch::zeros({lead, c.tokens, c.span}).masked_fill(keep.logical_not(), -INFINITY);
      mask = c.mask_dims == 4 ? mask.unsqueeze(1) : mask.squeeze(0);
      mask = mask.to(Options());
    }
    const auto want = CacheAttention(q, cache, c.span, mask, FusedImpl::kReference);
    const auto got = CacheAttention(q, cache, c.span, mask, FusedImpl::kKernel);
    const double err = Relative(got, want);
    std::cout << "[fused attention] " << c.name << ": " << err << "\n";
    EXPECT_LE(err, Tolerance(GetParam())) << c.name;
  }
}

TEST_P(FusedKernelsTest, LinearResidualFollowsItsReference) {
  for (const auto& [rows, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {2, 2048, 2048}, {8, 1024, 4096}, {1, 896, 896}}) {
    const auto residual = Random({rows, 1, out}), x = Random({rows, 1, in});
    const auto weight = Random({out, in}, 1.0 / std::sqrt(static_cast<double>(in)));
    const double err = Relative(LinearResidual(residual, x, weight, FusedImpl::kKernel),
                                LinearResidual(residual, x, weight, FusedImpl::kReference));
    std::cout << "[fused linear+residual] " << rows << " x " << in << " -> " << out << ": " << err
              << "\n";
    EXPECT_LE(err, Tolerance(GetParam()));
  }
}

TEST_P(FusedKernelsTest, NormSwiGluInputFollowsItsReference) {
  for (const auto& [rows, dim, hidden] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{2, 2048, 5632}, {6, 1024, 2816}}) {
    const auto h = Random({rows, 1, dim}), norm = Random({dim}, 0.5) + 1.0;
    const auto w13 = Random({2 * hidden, dim}, 1.0 / std::sqrt(static_cast<double>(dim)));
    const torch::Tensor none;
    const double err =
        Relative(NormSwiGluInput(h, norm, 1e-6, none, none, w13, FusedImpl::kKernel),
                 NormSwiGluInput(h, norm, 1e-6, none, none, w13, FusedImpl::kReference));
    std::cout << "[fused norm+swiglu] " << rows << " x " << dim << " -> " << hidden << ": " << err
              << "\n";
    EXPECT_LE(err, Tolerance(GetParam()));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedKernelsTest,
                         ::testing::Values(torch::kFloat32, torch::kBFloat16),
                         [](const ::testing::TestParamInfo<torch::ScalarType>& info) {
                           return info.param == torch::kFloat32 ? "float32" : "bfloat16";
                         });

// The guided draw reads float32 logits whatever the model's dtype: greedy rows take exactly the
// reference's argmax; a sampled row's token moves only when its uniform lands within float
// rounding of a boundary of the cumulative mass, so 255 of 256 must agree.
TEST(FusedGuidedDrawTest, FollowsGuidedProbabilitiesAndDrawRows) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(FusedKernelsBuilt()) << "tools/build_engine.sh found no nvcc";
  torch::manual_seed(9);
  constexpr int64_t kRows = 320, kGreedy = 64, kVocab = 16384;
  const auto on = torch::TensorOptions().device(torch::kCUDA);
  const auto cond = (torch::randn({kRows, kVocab}) * 3).to(on);
  const auto uncond = (torch::randn({kRows, kVocab}) * 3).to(on);
  const auto cfg = (torch::rand({kRows}) * 6 + 1).to(on);
  auto temperature = torch::rand({kRows}) + 0.5;
  temperature.narrow(0, 0, kGreedy).zero_();
  temperature = temperature.to(on);
  const auto uniforms = torch::rand({kRows}, torch::kFloat64).to(on);
  const auto want = GuidedDraw(cond, uncond, cfg, temperature, uniforms, FusedImpl::kReference);
  const auto got = GuidedDraw(cond, uncond, cfg, temperature, uniforms, FusedImpl::kKernel);
  const auto equal = torch::eq(got, want).to(torch::kCPU);
  const int64_t greedy_equal = equal.narrow(0, 0, kGreedy).sum().item<int64_t>();
  const int64_t sampled_equal = equal.narrow(0, kGreedy, kRows - kGreedy).sum().item<int64_t>();
  std::cout << "[fused draw] greedy " << greedy_equal << " / " << kGreedy << ", sampled "
            << sampled_equal << " / " << kRows - kGreedy << " equal to the reference\n";
  EXPECT_EQ(greedy_equal, kGreedy);
  EXPECT_GE(sampled_equal, kRows - kGreedy - 1);
}

}  // namespace
}  // namespace mulo::engine
