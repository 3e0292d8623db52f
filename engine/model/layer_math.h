// The elementwise arithmetic of a decoder layer that more than one implementation shares: the
// block's LibTorch path (block.h) and the fused kernels' references (engine/kernels/fused_ops.h).
#ifndef MULO_ENGINE_MODEL_LAYER_MATH_H_
#define MULO_ENGINE_MODEL_LAYER_MATH_H_

#include <torch/types.h>

#include <functional>

namespace mulo::engine {

// RMSNorm in float32, cast back to x's dtype, then scaled (as upstream). On a CUDA device with
// LibTorch 2 it is LibTorch's fused kernel (one launch instead of eight; in bf16 the scale is
// applied before the final rounding rather than after, a difference of one bf16 rounding).
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Rotates interleaved pairs of x [B, n, H, hd] by table rows `freqs` [n, hd/2, 2], or
// [B, n, hd/2, 2] for rows of each stream's own.
torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& freqs);

// The heads of fused projections qkv [B, n, (H + 2 KV) hd]: q [B, n, H, hd], k and v
// [B, n, KV, hd], q and k rotated by `rope` (ApplyRotary's table; undefined: not rotated).
struct QkvHeads {
  torch::Tensor q, k, v;
};
QkvHeads SplitQkv(const torch::Tensor& qkv, const torch::Tensor& rope, int64_t n_head,
                  int64_t n_kv_head, int64_t head_dim);

// Attention of q [B, H, n, hd] over keys and values [B, KV, span, hd] (a key head serves
// H / KV query heads) under an additive mask broadcastable to [B, H, n, span] (undefined:
// every key): [B, n, H hd]. On a CUDA device with LibTorch 2 it is one fused SDPA kernel.
torch::Tensor AttendKeys(const torch::Tensor& q, torch::Tensor keys, torch::Tensor values,
                         const torch::Tensor& mask);

// in [rows, in] x weight [out, in]^T, however the caller groups the rows.
using RowLinear = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;

// SiLU(f W1^T) * (f W3^T), the down projection's input, by `linear`: w13 = [W1; W3] stacked
// (one GEMM), or undefined with w1 and w3 apart.
torch::Tensor SwiGluInput(const torch::Tensor& f, const torch::Tensor& w1, const torch::Tensor& w3,
                          const torch::Tensor& w13, const RowLinear& linear);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_LAYER_MATH_H_
