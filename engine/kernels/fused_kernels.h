// Fused CUDA kernels of the decode step (issue 63): a transformer layer in 5 launches instead of
// ~10 (LibTorch's ops plus cuBLAS), the guidance combine and the draw in one more.
//
// A small decode step (one or a few rows per guidance stream) is bound by kernel count and
// launch latency, not by bytes (docs/gpu.md: 313 kernels per step, ~5.5 us each, 4.4x the
// bandwidth floor on the H200). So every GEMM here is a GEMV over at most kMaxRows input rows
// that carries the elementwise work on either side of it:
//   1. RMSNorm -> QKV projection (+ bias) -> rotary on q and k -> k and v into the cache;
//   2. decode attention over the cache, split over the keys (flash-decoding), then its combine;
//   3. output projection + the residual;
//   4. RMSNorm -> gate and up projections -> SiLU(gate) * up;
//   5. down projection + the residual.
// Each kernel rounds where the LibTorch ops it replaces round (every op's output is a tensor of
// the model's dtype), so the references in fused_ops.h are those ops and a kernel differs from
// them only by the order of its float sums.
//
// This header names no CUDA or LibTorch type, so that the C++ side compiles without CUDA's
// headers; fused_kernels.cu is compiled by nvcc (tools/build_engine.sh) and fused_ops.cc calls
// it when MULO_WITH_CUDA_KERNELS is defined.
#ifndef MULO_ENGINE_KERNELS_FUSED_KERNELS_H_
#define MULO_ENGINE_KERNELS_FUSED_KERNELS_H_

#include <cstdint>

namespace mulo::engine::kernels {

// The element types the kernels are instantiated for.
enum class Dtype { kFloat32, kBFloat16 };

// The most input rows one GEMV computes (guidance streams x new tokens); more take LibTorch.
inline constexpr int kMaxRows = 8;

// What a GEMV does before its dot products.
enum class Prologue {
  kNone,     // x as it is
  kRmsNorm,  // T(T(x * rsqrt(mean(x^2) + eps)) * norm_weight), RmsNorm's roundings
};

// What it does with row r's sum y (y = T(acc + bias[r])).
enum class Epilogue {
  kStore,        // out[m, r] = y
  kResidual,     // out[m, r] = T(residual[m, r] + y) (residual may be out itself)
  kSiluMul,      // rows r < N / 2 and r + N / 2 pair: out[m, r] = T(T(silu(y_r)) * y_{r+N/2})
  kRotaryStore,  // qkv rows: q rotated into out, k rotated and v into the cache
};

// Where the kRotaryStore epilogue writes k and v: a layer's cache tensors [slots, n_kv_head,
// capacity, head_dim] (strides in elements), stream b's slot and token i's row.
struct CacheTarget {
  void* keys = nullptr;
  void* values = nullptr;
  int64_t slot_stride = 0, head_stride = 0, row_stride = 0;
  const int64_t* slots = nullptr;  // [streams]; null: stream b is slot b
  const int64_t* rows = nullptr;   // [n] shared or [streams, n] (rows_per_stream); null: below
  bool rows_per_stream = false;
  int64_t row_base = 0;  // without `rows`: token i goes to row_base + i
};

struct GemvArgs {
  Dtype dtype = Dtype::kBFloat16;
  Prologue prologue = Prologue::kNone;
  Epilogue epilogue = Epilogue::kStore;
  int rows = 0;                               // M <= kMaxRows: streams * tokens, stream-major
  int tokens = 1;                             // new tokens per stream (m = b * tokens + i)
  int64_t out_features = 0, in_features = 0;  // N (even), K (a multiple of 16 bytes' elements)
  const void* x = nullptr;                    // [M, K], row stride x_stride
  int64_t x_stride = 0;
  const void* norm_weight = nullptr;  // [K] (kRmsNorm)
  float eps = 0.0f;
  const void* weight = nullptr;  // [N, K] contiguous, 16-byte aligned
  const void* bias = nullptr;    // [N] or null
  void* out = nullptr;           // [M, N] (kSiluMul: [M, N / 2]; kRotaryStore: q [M, heads * hd])
  int64_t out_stride = 0;
  const void* residual = nullptr;  // kResidual: [M, N], row stride residual_stride
  int64_t residual_stride = 0;
  // kRotaryStore: the heads, and the rotation table float32 [.., head_dim / 2, 2] (cos, sin) of
  // each token (rope_per_stream: [streams, tokens, ..], else [tokens, ..]); null: no rotation
  // (absolute position models).
  int n_head = 0, n_kv_head = 0, head_dim = 0;
  const float* rope = nullptr;
  bool rope_per_stream = false;
  CacheTarget cache;
  // The device's SMs: the grid is capped at 4 blocks per SM, and a small output splits K across
  // warps until it has 2 per SM (0: one warp per pair of rows, no cap).
  int sm_count = 0;
};

// Decode attention of q [streams, tokens, n_head, head_dim] (contiguous) over the cache rows
// [0, span) of each stream's slot, with an optional additive mask of the model's dtype:
// mask[b * mask_stream_stride + i * mask_token_stride + j] (stride 0 broadcasts). Grouped-query
// heads read their shared key head. The split partials go to `workspace` (float32, at least
// WorkspaceFloats() of them), the result to out [streams, tokens, n_head * head_dim].
struct AttentionArgs {
  Dtype dtype = Dtype::kBFloat16;
  int streams = 0, tokens = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
  int64_t span = 0;
  const void* q = nullptr;
  CacheTarget cache;  // keys, values, strides and slots (rows unused)
  const void* mask = nullptr;
  int64_t mask_stream_stride = 0, mask_token_stride = 0;
  float scale = 1.0f;  // 1 / sqrt(head_dim)
  int splits = 1;      // key ranges per (stream, token, head); see AttentionSplits
  float* workspace = nullptr;
  void* out = nullptr;
};

// The key ranges that give about two blocks per SM, each at least 64 keys long.
int AttentionSplits(int64_t queries, int64_t span, int sm_count);
int64_t AttentionWorkspaceFloats(const AttentionArgs& args);

// The guidance combine, the temperature, softmax and the draw of one token per row, as
// GuidedProbabilities + DrawRows (row_sampler.h) decide it: guided = u + cfg (c - u); at
// temperature 0 its argmax (the first on ties); otherwise p = softmax(guided / temperature) in
// float32 and the first token whose cumulative mass (in float64) exceeds uniform * total, or
// the last token with mass when rounding passes the top.
struct GuidedDrawArgs {
  int rows = 0;
  int64_t vocab = 0;
  const float* cond = nullptr;    // [rows, vocab] float32, row stride `stride`
  const float* uncond = nullptr;  // [rows, vocab]
  int64_t stride = 0;
  const float* cfg = nullptr;          // [rows]
  const float* temperature = nullptr;  // [rows]
  const double* uniforms = nullptr;    // [rows]
  int64_t* tokens = nullptr;           // [rows] out
};

// Each launches on `stream` (a cudaStream_t) and returns 0, or the cudaError_t of the launch.
int LaunchGemv(const GemvArgs& args, void* stream);
int LaunchAttention(const AttentionArgs& args, void* stream);
int LaunchGuidedDraw(const GuidedDrawArgs& args, void* stream);

}  // namespace mulo::engine::kernels

#endif  // MULO_ENGINE_KERNELS_FUSED_KERNELS_H_
