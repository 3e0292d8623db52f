// The fused decode ops (issue 63) on tensors: each runs its CUDA kernel (fused_kernels.h) when
// the build has them (MULO_WITH_CUDA_KERNELS, tools/build_engine.sh with nvcc) and the tensors
// qualify (CUDA, float32 or bfloat16, at most kernels::kMaxRows rows, 16-byte aligned rows),
// and otherwise its reference: the LibTorch ops the block runs today (block.cc), with the same
// roundings. On the CPU the references give the block's bits exactly, so a CPU test of a model
// loaded with LoadOptions::fused_kernels checks where every row, slot and mask goes, and the
// GPU test (tests/gpu) checks each kernel against its reference.
#ifndef MULO_ENGINE_KERNELS_FUSED_OPS_H_
#define MULO_ENGINE_KERNELS_FUSED_OPS_H_

#include <torch/types.h>

#include <cstdint>

namespace mulo::engine {

// Which implementation an op runs.
enum class FusedImpl {
  kAuto,       // the kernel where it qualifies, else the reference
  kReference,  // the LibTorch ops
  kKernel,     // the kernel; a call it cannot run is an error (the GPU parity tests)
};

// Whether this build compiled the CUDA kernels.
bool FusedKernelsBuilt();

// A layer's cache as the ops address it (KvCache::Storage).
struct CacheLayer {
  torch::Tensor keys, values;  // [streams or pool slots, n_kv_head, capacity, head_dim]
  torch::Tensor slot_index;    // [streams] int64 on a slot-indexed view; undefined: stream b
};

// Where a forward's new rows go: rows [n] (every stream's) or [streams, n], or, undefined,
// rows row_base + i (an eager append at the cache's length).
struct NewRows {
  torch::Tensor rows;
  int64_t row_base = 0;
};

struct HeadLayout {
  int64_t n_head = 0, n_kv_head = 0, head_dim = 0;
};

// RMSNorm(x) -> x W_qkv^T (+ bias) -> rotary on q and k (rope [n, hd/2, 2] or [B, n, hd/2, 2];
// undefined: none) -> k and v stored at `rows` of `cache`. x [B, n, dim] -> q [B, n, H, hd].
torch::Tensor NormQkvRotaryStore(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                 double eps, const torch::Tensor& wqkv, const torch::Tensor& bqkv,
                                 const torch::Tensor& rope, const HeadLayout& heads,
                                 const CacheLayer& cache, const NewRows& rows,
                                 FusedImpl impl = FusedImpl::kAuto);

// Attention of q [B, n, H, hd] over rows [0, span) of each stream's cache under an additive
// mask of q's dtype ([n, span] or [B or 1, 1, n, span]; undefined: every row) -> [B, n, H hd].
torch::Tensor CacheAttention(const torch::Tensor& q, const CacheLayer& cache, int64_t span,
                             const torch::Tensor& mask, FusedImpl impl = FusedImpl::kAuto);

// residual + in W^T: [B, n, out].
torch::Tensor LinearResidual(const torch::Tensor& residual, const torch::Tensor& in,
                             const torch::Tensor& weight, FusedImpl impl = FusedImpl::kAuto);

// SiLU(f W1^T) * (f W3^T) of f = RMSNorm(h): the down projection's input, [B, n, hidden].
// w13 = [W1; W3] stacked (the CUDA layout), or undefined with w1 and w3 apart (the CPU's).
torch::Tensor NormSwiGluInput(const torch::Tensor& h, const torch::Tensor& norm_weight, double eps,
                              const torch::Tensor& w1, const torch::Tensor& w3,
                              const torch::Tensor& w13, FusedImpl impl = FusedImpl::kAuto);

// One token per row of guided logits (cond, uncond float32 [rows, vocab]; cfg, temperature
// float32 [rows]; uniforms float64 [rows]), as DrawRows(GuidedProbabilities(...)) decides:
// int64 [rows].
torch::Tensor GuidedDraw(const torch::Tensor& cond, const torch::Tensor& uncond,
                         const torch::Tensor& cfg, const torch::Tensor& temperature,
                         const torch::Tensor& uniforms, FusedImpl impl = FusedImpl::kAuto);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_KERNELS_FUSED_OPS_H_
