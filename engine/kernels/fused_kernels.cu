// The fused decode kernels of fused_kernels.h. Written for small decode steps: a warp per pair
// of weight rows streams 16 bytes per lane per load and keeps every input row's sum in
// registers, so a GEMV reads its weights once whatever the row count (<= kMaxRows).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "engine/kernels/fused_kernels.h"

namespace mulo::engine::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kGemvWarps = 8;  // kMaxRows rows' norms: one warp each
constexpr int kAttentionWarps = 4;
constexpr int kDrawThreads = 256;
constexpr int64_t kMinKeysPerSplit = 64;
static_assert(kGemvWarps >= kMaxRows, "one warp per input row computes its norm");

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// v as a tensor of dtype T stores it (what every LibTorch op's output does).
template <typename T>
__device__ __forceinline__ float Round(float v) {
  return ToFloat(FromFloat<T>(v));
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// 16 bytes of T, loaded through the read-only cache in one instruction.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> Load16(const T* p) {
  Pack<T> out;
  *reinterpret_cast<uint4*>(out.v) = __ldg(reinterpret_cast<const uint4*>(p));
  return out;
}

// ---- GEMV with a prologue and an epilogue --------------------------------------------------

// Row m's outputs at rows r0 and r1 of the weight: y0, y1 its rounded sums (bias added).
template <typename T, Epilogue E>
__device__ void Finish(const GemvArgs& a, int m, int64_t r0, int64_t r1, float y0, float y1) {
  T* out = static_cast<T*>(a.out);
  if constexpr (E == Epilogue::kStore) {
    out[m * a.out_stride + r0] = FromFloat<T>(y0);
    out[m * a.out_stride + r1] = FromFloat<T>(y1);
  } else if constexpr (E == Epilogue::kResidual) {
    const T* residual = static_cast<const T*>(a.residual) + m * a.residual_stride;
    const float x0 = ToFloat(residual[r0]), x1 = ToFloat(residual[r1]);
    out[m * a.out_stride + r0] = FromFloat<T>(x0 + y0);
    out[m * a.out_stride + r1] = FromFloat<T>(x1 + y1);
  } else if constexpr (E == Epilogue::kSiluMul) {
    const float gate = Round<T>(y0 / (1.0f + expf(-y0)));
    out[m * a.out_stride + r0] = FromFloat<T>(gate * y1);
  } else {  // kRotaryStore: r0 even, r1 = r0 + 1, both in one head
    const int64_t head = r0 / a.head_dim;
    const int d = static_cast<int>(r0 % a.head_dim);
    const int b = m / a.tokens, i = m % a.tokens;
    if (head < a.n_head + a.n_kv_head && a.rope != nullptr) {
      const float* rotation = a.rope + ((a.rope_per_stream ? m : i) * (a.head_dim / 2) + d / 2) * 2;
      const float cos = rotation[0], sin = rotation[1];
      const float x0 = y0, x1 = y1;
      y0 = x0 * cos - x1 * sin;
      y1 = x1 * cos + x0 * sin;
    }
    if (head < a.n_head) {
      out[m * a.out_stride + r0] = FromFloat<T>(y0);
      out[m * a.out_stride + r1] = FromFloat<T>(y1);
      return;
    }
    const CacheTarget& c = a.cache;
    const bool key = head < a.n_head + a.n_kv_head;
    const int64_t kv_head = head - a.n_head - (key ? 0 : a.n_kv_head);
    const int64_t slot = c.slots != nullptr ? c.slots[b] : b;
    const int64_t row = c.rows != nullptr ? c.rows[c.rows_per_stream ? m : i] : c.row_base + i;
    T* dst = static_cast<T*>(key ? c.keys : c.values) + slot * c.slot_stride +
             kv_head * c.head_stride + row * c.row_stride + d;
    dst[0] = FromFloat<T>(y0);
    dst[1] = FromFloat<T>(y1);
  }
}

template <typename T, Prologue P, Epilogue E>
__global__ void __launch_bounds__(kGemvWarps* kWarp) GemvKernel(const GemvArgs a, int split) {
  constexpr int kVec = Pack<T>::kSize;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int rows = a.rows;
  const int64_t k_size = a.in_features;
  const T* x = static_cast<const T*>(a.x);
  __shared__ float inv_rms[kMaxRows];
  if constexpr (P == Prologue::kRmsNorm) {
    if (warp < rows) {
      const T* row = x + warp * a.x_stride;
      float sum = 0.0f;
      for (int64_t k = lane * kVec; k < k_size; k += kWarp * kVec) {
        const Pack<T> v = Load16(row + k);
#pragma unroll
        for (int j = 0; j < kVec; ++j) sum += ToFloat(v.v[j]) * ToFloat(v.v[j]);
      }
      sum = WarpSum(sum);
      if (lane == 0) inv_rms[warp] = rsqrtf(sum / static_cast<float>(k_size) + a.eps);
    }
    __syncthreads();
  }
  const T* weight = static_cast<const T*>(a.weight);
  const T* norm_weight = static_cast<const T*>(a.norm_weight);
  const T* bias = static_cast<const T*>(a.bias);
  const int64_t pairs = a.out_features / 2;
  // `split` warps share a pair, each taking every split-th stretch of K (a small output has
  // too few pairs to keep every SM reading); they meet in shared memory.
  const int per_block = kGemvWarps / split, part = warp % split;
  __shared__ float partial[kGemvWarps][2][kMaxRows];
  // Every warp of a block runs every group (the barriers below are the block's).
  for (int64_t group = blockIdx.x; group * per_block < pairs; group += gridDim.x) {
    const int64_t pair = group * per_block + warp / split;
    const bool valid = pair < pairs;
    // kSiluMul pairs a gate row with its up row; the others take adjacent rows (rotary's pairs).
    const int64_t r0 = E == Epilogue::kSiluMul ? pair : 2 * pair;
    const int64_t r1 = E == Epilogue::kSiluMul ? pair + pairs : 2 * pair + 1;
    const T* w0 = weight + r0 * k_size;
    const T* w1 = weight + r1 * k_size;
    float acc0[kMaxRows], acc1[kMaxRows];
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) acc0[m] = acc1[m] = 0.0f;
    const int64_t k_begin = valid ? (int64_t{part} * kWarp + lane) * kVec : k_size;
    for (int64_t k = k_begin; k < k_size; k += int64_t{split} * kWarp * kVec) {
      const Pack<T> a0 = Load16(w0 + k), a1 = Load16(w1 + k);
      Pack<T> g;
      if constexpr (P == Prologue::kRmsNorm) g = Load16(norm_weight + k);
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        if (m >= rows) break;
        const Pack<T> xv = Load16(x + m * a.x_stride + k);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          float xf = ToFloat(xv.v[j]);
          if constexpr (P == Prologue::kRmsNorm) {
            xf = Round<T>(Round<T>(xf * inv_rms[m]) * ToFloat(g.v[j]));
          }
          acc0[m] = fmaf(ToFloat(a0.v[j]), xf, acc0[m]);
          acc1[m] = fmaf(ToFloat(a1.v[j]), xf, acc1[m]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
      if (m >= rows) break;
      acc0[m] = WarpSum(acc0[m]);
      acc1[m] = WarpSum(acc1[m]);
    }
    if (split > 1) {
      if (lane == 0) {
#pragma unroll
        for (int m = 0; m < kMaxRows; ++m) {
          partial[warp][0][m] = acc0[m];
          partial[warp][1][m] = acc1[m];
        }
      }
      __syncthreads();
      if (part == 0) {
        for (int other = 1; other < split; ++other) {
#pragma unroll
          for (int m = 0; m < kMaxRows; ++m) {
            acc0[m] += partial[warp + other][0][m];
            acc1[m] += partial[warp + other][1][m];
          }
        }
      }
      __syncthreads();  // `partial` is the next group's
    }
    if (!valid || part != 0) continue;
    const float b0 = bias != nullptr ? ToFloat(bias[r0]) : 0.0f;
    const float b1 = bias != nullptr ? ToFloat(bias[r1]) : 0.0f;
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {  // lane m finishes row m (a constant index: registers)
      if (m < rows && lane == m) {
        Finish<T, E>(a, m, r0, r1, Round<T>(acc0[m] + b0), Round<T>(acc1[m] + b1));
      }
    }
  }
}

template <typename T, Prologue P>
int LaunchGemvFor(const GemvArgs& a, cudaStream_t stream) {
  constexpr int kVec = Pack<T>::kSize;
  const int64_t pairs = a.out_features / 2;
  // Split K across warps until the grid has two blocks per SM (each warp keeping at least one
  // load per lane).
  int split = 1;
  while (split < kGemvWarps && (pairs * split + kGemvWarps - 1) / kGemvWarps < 2 * a.sm_count &&
         a.in_features >= int64_t{2 * split} * kWarp * kVec) {
    split *= 2;
  }
  const int64_t per_block = kGemvWarps / split;
  int64_t blocks = (pairs + per_block - 1) / per_block;
  if (a.sm_count > 0 && blocks > 4 * int64_t{a.sm_count}) blocks = 4 * int64_t{a.sm_count};
  const dim3 grid(static_cast<unsigned>(blocks)), block(kGemvWarps * kWarp);
  switch (a.epilogue) {
    case Epilogue::kStore:
      GemvKernel<T, P, Epilogue::kStore><<<grid, block, 0, stream>>>(a, split);
      break;
    case Epilogue::kResidual:
      GemvKernel<T, P, Epilogue::kResidual><<<grid, block, 0, stream>>>(a, split);
      break;
    case Epilogue::kSiluMul:
      GemvKernel<T, P, Epilogue::kSiluMul><<<grid, block, 0, stream>>>(a, split);
      break;
    case Epilogue::kRotaryStore:
      GemvKernel<T, P, Epilogue::kRotaryStore><<<grid, block, 0, stream>>>(a, split);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchGemvTyped(const GemvArgs& a, cudaStream_t stream) {
  return a.prologue == Prologue::kRmsNorm ? LaunchGemvFor<T, Prologue::kRmsNorm>(a, stream)
                                          : LaunchGemvFor<T, Prologue::kNone>(a, stream);
}

// ---- decode attention (flash-decoding) -----------------------------------------------------

// One (stream, token, head) query over one key range: each warp takes every fourth key, its
// lanes head_dim / 32 dimensions each (dimension t * 32 + lane: a key row is read coalesced),
// an online softmax per warp; the warps merge in shared memory and the block writes its
// partial (max, sum, weighted values) for AttentionCombine.
template <typename T, int kDims>
__global__ void __launch_bounds__(kAttentionWarps* kWarp) AttentionPartial(const AttentionArgs a) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t query = blockIdx.x;  // (stream * tokens + token) * n_head + head
  const int head = static_cast<int>(query % a.n_head);
  const int64_t token_row = query / a.n_head;  // stream * tokens + token
  const int b = static_cast<int>(token_row / a.tokens), i = static_cast<int>(token_row % a.tokens);
  const int kv_head = head / (a.n_head / a.n_kv_head);
  const int hd = kDims * kWarp;
  const CacheTarget& c = a.cache;
  const int64_t slot = c.slots != nullptr ? c.slots[b] : b;
  const T* keys = static_cast<const T*>(c.keys) + slot * c.slot_stride + kv_head * c.head_stride;
  const T* values =
      static_cast<const T*>(c.values) + slot * c.slot_stride + kv_head * c.head_stride;
  const T* q = static_cast<const T*>(a.q) + query * hd;
  const T* mask = a.mask != nullptr ? static_cast<const T*>(a.mask) + b * a.mask_stream_stride +
                                          i * a.mask_token_stride
                                    : nullptr;
  float qv[kDims], acc[kDims];
#pragma unroll
  for (int t = 0; t < kDims; ++t) {
    qv[t] = ToFloat(q[t * kWarp + lane]);
    acc[t] = 0.0f;
  }
  const int64_t per_split = (a.span + a.splits - 1) / a.splits;
  const int64_t begin = blockIdx.y * per_split;
  const int64_t end = begin + per_split < a.span ? begin + per_split : a.span;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t j = begin + warp; j < end; j += kAttentionWarps) {
    const T* key = keys + j * c.row_stride;
    float dot = 0.0f;
#pragma unroll
    for (int t = 0; t < kDims; ++t) dot = fmaf(qv[t], ToFloat(key[t * kWarp + lane]), dot);
    float score = WarpSum(dot) * a.scale;
    if (mask != nullptr) score += ToFloat(mask[j]);
    if (score == -INFINITY) continue;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max), weight = expf(score - new_max);
    running_sum = running_sum * correction + weight;
    const T* value = values + j * c.row_stride;
#pragma unroll
    for (int t = 0; t < kDims; ++t) {
      acc[t] = acc[t] * correction + weight * ToFloat(value[t * kWarp + lane]);
    }
    running_max = new_max;
  }
  __shared__ float warp_max[kAttentionWarps], warp_sum[kAttentionWarps];
  __shared__ float warp_acc[kAttentionWarps][kDims * kWarp];
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum[warp] = running_sum;
  }
#pragma unroll
  for (int t = 0; t < kDims; ++t) warp_acc[warp][t * kWarp + lane] = acc[t];
  __syncthreads();
  float block_max = -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  float* partial = a.workspace + (query * a.splits + blockIdx.y) * (hd + 2);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
      if (warp_max[w] != -INFINITY) sum += warp_acc[w][d] * expf(warp_max[w] - block_max);
    }
    partial[2 + d] = sum;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
      if (warp_max[w] != -INFINITY) sum += warp_sum[w] * expf(warp_max[w] - block_max);
    }
    partial[0] = block_max;
    partial[1] = sum;
  }
}

// Merges one query's split partials into its output row.
template <typename T>
__global__ void AttentionCombine(const AttentionArgs a) {
  const int64_t query = blockIdx.x;
  const int hd = a.head_dim;
  const float* partials = a.workspace + query * a.splits * (hd + 2);
  float total_max = -INFINITY;
  for (int s = 0; s < a.splits; ++s) total_max = fmaxf(total_max, partials[s * (hd + 2)]);
  float total_sum = 0.0f;
  for (int s = 0; s < a.splits; ++s) {
    const float m = partials[s * (hd + 2)];
    if (m != -INFINITY) total_sum += partials[s * (hd + 2) + 1] * expf(m - total_max);
  }
  T* out = static_cast<T*>(a.out) + query * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < a.splits; ++s) {
      const float m = partials[s * (hd + 2)];
      if (m != -INFINITY) sum += partials[s * (hd + 2) + 2 + d] * expf(m - total_max);
    }
    out[d] = FromFloat<T>(sum / total_sum);
  }
}

template <typename T, int kDims>
int LaunchAttentionFor(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t queries = int64_t{a.streams} * a.tokens * a.n_head;
  const dim3 grid(static_cast<unsigned>(queries), static_cast<unsigned>(a.splits));
  AttentionPartial<T, kDims><<<grid, kAttentionWarps * kWarp, 0, stream>>>(a);
  AttentionCombine<T><<<static_cast<unsigned>(queries), 128, 0, stream>>>(a);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchAttentionTyped(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.head_dim) {
    case 32:
      return LaunchAttentionFor<T, 1>(a, stream);
    case 64:
      return LaunchAttentionFor<T, 2>(a, stream);
    case 128:
      return LaunchAttentionFor<T, 4>(a, stream);
    case 256:
      return LaunchAttentionFor<T, 8>(a, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

// ---- the guided draw -----------------------------------------------------------------------

struct ArgMax {
  float value;
  int64_t index;
};

__device__ __forceinline__ ArgMax Better(ArgMax a, ArgMax b) {
  // The larger value; the smaller index on ties (torch's argmax takes the first).
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

// Block-wide reductions over kDrawThreads threads through shared memory.
__device__ float BlockMax(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kDrawThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  const float out = scratch[0];
  __syncthreads();
  return out;
}

__device__ float BlockSum(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kDrawThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
    __syncthreads();
  }
  const float out = scratch[0];
  __syncthreads();
  return out;
}

__global__ void __launch_bounds__(kDrawThreads) GuidedDraw(const GuidedDrawArgs a) {
  __shared__ float scratch[kDrawThreads];
  __shared__ ArgMax best[kDrawThreads];
  __shared__ double prefix[kDrawThreads];
  __shared__ unsigned long long chosen;
  const int row = blockIdx.x;
  const int64_t vocab = a.vocab;
  const float* cond = a.cond + row * a.stride;
  const float* uncond = a.uncond + row * a.stride;
  const float cfg = a.cfg[row], temperature = a.temperature[row];
  auto guided = [&](int64_t v) { return uncond[v] + cfg * (cond[v] - uncond[v]); };
  if (temperature == 0.0f) {
    ArgMax mine{-INFINITY, vocab};
    for (int64_t v = threadIdx.x; v < vocab; v += kDrawThreads) mine = Better(mine, {guided(v), v});
    best[threadIdx.x] = mine;
    __syncthreads();
    for (int stride = kDrawThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride)
        best[threadIdx.x] = Better(best[threadIdx.x], best[threadIdx.x + stride]);
      __syncthreads();
    }
    if (threadIdx.x == 0) a.tokens[row] = best[0].index < vocab ? best[0].index : 0;
    return;
  }
  float local_max = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += kDrawThreads) {
    local_max = fmaxf(local_max, guided(v) / temperature);
  }
  const float max = BlockMax(local_max, scratch);
  float local_sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += kDrawThreads) {
    local_sum += expf(guided(v) / temperature - max);
  }
  const float sum = BlockSum(local_sum, scratch);
  auto p = [&](int64_t v) { return expf(guided(v) / temperature - max) / sum; };
  // The cumulative mass in float64 over contiguous chunks: each thread sums its chunk, thread 0
  // turns the sums into prefixes, and the thread whose chunk crosses u * total finds the token.
  const int64_t chunk = (vocab + kDrawThreads - 1) / kDrawThreads;
  const int64_t first = threadIdx.x * chunk;
  const int64_t last = first + chunk < vocab ? first + chunk : vocab;
  double mine = 0.0;
  int64_t last_with_mass = -1;
  for (int64_t v = first; v < last; ++v) {
    const float pv = p(v);
    mine += pv;
    if (pv > 0.0f) last_with_mass = v;
  }
  __shared__ double total;
  __shared__ long long with_mass;
  prefix[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    double running = 0.0;
    for (int t = 0; t < kDrawThreads; ++t) {
      const double own = prefix[t];
      prefix[t] = running;
      running += own;
    }
    total = running;
    chosen = static_cast<unsigned long long>(vocab);
    with_mass = -1;
  }
  __syncthreads();
  if (last_with_mass >= 0) atomicMax(&with_mass, static_cast<long long>(last_with_mass));
  const double target = total * a.uniforms[row];
  double running = prefix[threadIdx.x];
  if (first < last && running + mine > target) {
    for (int64_t v = first; v < last; ++v) {
      running += p(v);
      if (running > target) {
        atomicMin(&chosen, static_cast<unsigned long long>(v));
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    a.tokens[row] = chosen < static_cast<unsigned long long>(vocab)
                        ? static_cast<int64_t>(chosen)
                        : (with_mass >= 0 ? with_mass : 0);
  }
}

}  // namespace

int AttentionSplits(int64_t queries, int64_t span, int sm_count) {
  const int64_t wanted = (2 * int64_t{sm_count} + queries - 1) / queries;
  const int64_t most = (span + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  int64_t splits = wanted < most ? wanted : most;
  return static_cast<int>(splits < 1 ? 1 : splits);
}

int64_t AttentionWorkspaceFloats(const AttentionArgs& a) {
  return int64_t{a.streams} * a.tokens * a.n_head * a.splits * (a.head_dim + 2);
}

int LaunchGemv(const GemvArgs& args, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return args.dtype == Dtype::kBFloat16 ? LaunchGemvTyped<__nv_bfloat16>(args, s)
                                        : LaunchGemvTyped<float>(args, s);
}

int LaunchAttention(const AttentionArgs& args, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return args.dtype == Dtype::kBFloat16 ? LaunchAttentionTyped<__nv_bfloat16>(args, s)
                                        : LaunchAttentionTyped<float>(args, s);
}

int LaunchGuidedDraw(const GuidedDrawArgs& args, void* stream) {
  GuidedDraw<<<args.rows, kDrawThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace mulo::engine::kernels
