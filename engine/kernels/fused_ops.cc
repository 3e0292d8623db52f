#include "engine/kernels/fused_ops.h"

#include <cmath>
#include <cstdint>

#include "engine/core/op_count.h"
#include "engine/model/layer_math.h"
#include "engine/sampling/row_sampler.h"

#ifdef MULO_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>

#include "engine/kernels/fused_kernels.h"
#endif

namespace mulo::engine {
namespace {

// ---- references: the block's LibTorch ops (block.cc), op for op ---------------------------

// k, v [B, KV, n, hd] into the cache at `rows`, as KvCache::Store / StoreAt write them.
void StoreRows(const CacheLayer& cache, const NewRows& rows, const torch::Tensor& k,
               const torch::Tensor& v) {
  const int64_t n = k.size(2);
  if (!rows.rows.defined()) {
    cache.keys.narrow(2, rows.row_base, n).copy_(k);
    cache.values.narrow(2, rows.row_base, n).copy_(v);
  } else if (cache.slot_index.defined()) {
    const int64_t streams = k.size(0), heads = k.size(1);
    const auto slot = cache.slot_index.view({streams, 1, 1});
    const auto head = torch::arange(heads, rows.rows.options()).view({1, heads, 1});
    const auto row = rows.rows.view({streams, 1, n});
    cache.keys.index_put_({slot, head, row}, k);
    cache.values.index_put_({slot, head, row}, v);
  } else {
    cache.keys.index_copy_(2, rows.rows, k);
    cache.values.index_copy_(2, rows.rows, v);
  }
}

torch::Tensor ReferenceNormQkv(const torch::Tensor& x, const torch::Tensor& norm_weight, double eps,
                               const torch::Tensor& wqkv, const torch::Tensor& bqkv,
                               const torch::Tensor& rope, const HeadLayout& h,
                               const CacheLayer& cache, const NewRows& rows) {
  const auto qkv = torch::linear(RmsNorm(x, norm_weight, eps), wqkv, bqkv);
  const QkvHeads split = SplitQkv(qkv, rope, h.n_head, h.n_kv_head, h.head_dim);
  StoreRows(cache, rows, split.k.transpose(1, 2), split.v.transpose(1, 2));
  return split.q;
}

torch::Tensor ReferenceAttention(const torch::Tensor& q, const CacheLayer& cache, int64_t span,
                                 const torch::Tensor& mask) {
  torch::Tensor keys = cache.keys.narrow(2, 0, span), values = cache.values.narrow(2, 0, span);
  if (cache.slot_index.defined()) {
    keys = keys.index_select(0, cache.slot_index);
    values = values.index_select(0, cache.slot_index);
  }
  return AttendKeys(q.transpose(1, 2), keys, values, mask);
}

// Whether to run the kernel: `qualifies` says whether it can.
bool UseKernel(FusedImpl impl, bool qualifies, const char* op) {
  if (impl == FusedImpl::kReference) return false;
  TORCH_CHECK(qualifies || impl == FusedImpl::kAuto, op,
              ": the fused kernel cannot run this call (",
              FusedKernelsBuilt() ? "its tensors do not qualify" : "not built", ")");
  return qualifies;
}

#ifdef MULO_WITH_CUDA_KERNELS

bool KernelDtype(const torch::Tensor& t) {
  return t.is_cuda() && (t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kBFloat16);
}

kernels::Dtype DtypeOf(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? kernels::Dtype::kBFloat16 : kernels::Dtype::kFloat32;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// x [M, K] rows and weight [N, K] as the GEMV reads them: 16-byte loads along K.
bool GemvQualifies(const torch::Tensor& x2, const torch::Tensor& weight) {
  const int64_t bytes = x2.element_size();
  return KernelDtype(x2) && weight.scalar_type() == x2.scalar_type() && weight.is_cuda() &&
         x2.size(0) <= kernels::kMaxRows && weight.is_contiguous() && weight.size(0) % 2 == 0 &&
         (x2.size(1) * bytes) % 16 == 0 && x2.stride(1) == 1 && (x2.stride(0) * bytes) % 16 == 0 &&
         Aligned16(x2.data_ptr()) && Aligned16(weight.data_ptr());
}

void* Stream() { return at::cuda::getCurrentCUDAStream().stream(); }
int SmCount() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }

// A launch's error, and its count (op_count.h: each launch is a kernel on the GPU's books).
void Check(int code, const char* op, int launches = 1) {
  TORCH_CHECK(code == 0, op,
              ": kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(code)));
  for (int i = 0; i < launches; ++i) CountKernelLaunch(op);
}

kernels::GemvArgs GemvOf(const torch::Tensor& x2, const torch::Tensor& weight,
                         const torch::Tensor& out2) {
  kernels::GemvArgs a;
  a.dtype = DtypeOf(x2);
  a.rows = static_cast<int>(x2.size(0));
  a.out_features = weight.size(0);
  a.in_features = weight.size(1);
  a.x = x2.data_ptr();
  a.x_stride = x2.stride(0);
  a.weight = weight.data_ptr();
  a.out = out2.data_ptr();
  a.out_stride = out2.stride(0);
  a.sm_count = SmCount();
  return a;
}

kernels::CacheTarget CacheTargetOf(const CacheLayer& cache) {
  kernels::CacheTarget c;
  c.keys = cache.keys.data_ptr();
  c.values = cache.values.data_ptr();
  c.slot_stride = cache.keys.stride(0);
  c.head_stride = cache.keys.stride(1);
  c.row_stride = cache.keys.stride(2);
  c.slots = cache.slot_index.defined() ? cache.slot_index.data_ptr<int64_t>() : nullptr;
  return c;
}

bool CacheQualifies(const CacheLayer& cache, const torch::Tensor& like) {
  return cache.keys.scalar_type() == like.scalar_type() && cache.keys.is_cuda() &&
         cache.keys.strides() == cache.values.strides() && cache.keys.stride(3) == 1 &&
         (!cache.slot_index.defined() ||
          (cache.slot_index.scalar_type() == torch::kInt64 && cache.slot_index.is_contiguous()));
}

torch::Tensor KernelNormQkv(const torch::Tensor& x2, int64_t b, int64_t n,
                            const torch::Tensor& norm_weight, double eps, const torch::Tensor& wqkv,
                            const torch::Tensor& bqkv, const torch::Tensor& rope,
                            const HeadLayout& h, const CacheLayer& cache, const NewRows& rows) {
  auto q = torch::empty({b, n, h.n_head, h.head_dim}, x2.options());
  kernels::GemvArgs a = GemvOf(x2, wqkv, q.view({b * n, h.n_head * h.head_dim}));
  a.prologue = kernels::Prologue::kRmsNorm;
  a.epilogue = kernels::Epilogue::kRotaryStore;
  a.tokens = static_cast<int>(n);
  a.norm_weight = norm_weight.data_ptr();
  a.eps = static_cast<float>(eps);
  a.bias = bqkv.defined() ? bqkv.data_ptr() : nullptr;
  a.n_head = static_cast<int>(h.n_head);
  a.n_kv_head = static_cast<int>(h.n_kv_head);
  a.head_dim = static_cast<int>(h.head_dim);
  const torch::Tensor table = rope.defined() ? rope.to(torch::kFloat32).contiguous() : rope;
  a.rope = table.defined() ? table.data_ptr<float>() : nullptr;
  a.rope_per_stream = table.defined() && table.dim() == 4;
  a.cache = CacheTargetOf(cache);
  const torch::Tensor row_index = rows.rows.defined() ? rows.rows.contiguous() : rows.rows;
  a.cache.rows = row_index.defined() ? row_index.data_ptr<int64_t>() : nullptr;
  a.cache.rows_per_stream = row_index.defined() && row_index.dim() == 2;
  a.cache.row_base = rows.row_base;
  Check(kernels::LaunchGemv(a, Stream()), "mulo::norm_qkv_rotary_store");
  return q;
}

torch::Tensor KernelAttention(const torch::Tensor& q, const CacheLayer& cache, int64_t span,
                              const torch::Tensor& mask) {
  kernels::AttentionArgs a;
  a.dtype = DtypeOf(q);
  a.streams = static_cast<int>(q.size(0));
  a.tokens = static_cast<int>(q.size(1));
  a.n_head = static_cast<int>(q.size(2));
  a.head_dim = static_cast<int>(q.size(3));
  a.n_kv_head = static_cast<int>(cache.keys.size(1));
  a.span = span;
  a.q = q.data_ptr();
  a.cache = CacheTargetOf(cache);
  if (mask.defined()) {
    a.mask = mask.data_ptr();
    a.mask_stream_stride = mask.dim() == 4 && mask.size(0) > 1 ? mask.stride(0) : 0;
    a.mask_token_stride = mask.stride(mask.dim() - 2);
  }
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));
  a.splits = kernels::AttentionSplits(int64_t{a.streams} * a.tokens * a.n_head, span, SmCount());
  auto workspace =
      torch::empty({kernels::AttentionWorkspaceFloats(a)}, q.options().dtype(torch::kFloat32));
  a.workspace = workspace.data_ptr<float>();
  auto out = torch::empty({q.size(0), q.size(1), q.size(2) * q.size(3)}, q.options());
  a.out = out.data_ptr();
  Check(kernels::LaunchAttention(a, Stream()), "mulo::cache_attention", /*launches=*/2);
  return out;
}

bool AttentionQualifies(const torch::Tensor& q, const CacheLayer& cache, int64_t span,
                        const torch::Tensor& mask) {
  const int64_t hd = q.size(3);
  const bool mask_ok =
      !mask.defined() ||
      (mask.scalar_type() == q.scalar_type() && mask.stride(-1) == 1 && mask.size(-1) == span &&
       (mask.dim() == 2 || (mask.dim() == 4 && mask.size(1) == 1)));
  return KernelDtype(q) && q.is_contiguous() && CacheQualifies(cache, q) && mask_ok &&
         (hd == 32 || hd == 64 || hd == 128 || hd == 256) && q.size(2) % cache.keys.size(1) == 0;
}

#endif  // MULO_WITH_CUDA_KERNELS

}  // namespace

bool FusedKernelsBuilt() {
#ifdef MULO_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

torch::Tensor NormQkvRotaryStore(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                 double eps, const torch::Tensor& wqkv, const torch::Tensor& bqkv,
                                 const torch::Tensor& rope, const HeadLayout& heads,
                                 const CacheLayer& cache, const NewRows& rows, FusedImpl impl) {
  bool qualifies = false;
#ifdef MULO_WITH_CUDA_KERNELS
  const torch::Tensor x2 = x.reshape({-1, x.size(-1)});
  qualifies = GemvQualifies(x2, wqkv) && CacheQualifies(cache, x) && heads.head_dim % 2 == 0 &&
              (!bqkv.defined() || bqkv.is_contiguous()) && norm_weight.is_contiguous() &&
              Aligned16(norm_weight.data_ptr());
  if (UseKernel(impl, qualifies, "NormQkvRotaryStore")) {
    return KernelNormQkv(x2, x.size(0), x.size(1), norm_weight, eps, wqkv, bqkv, rope, heads, cache,
                         rows);
  }
#else
  UseKernel(impl, qualifies, "NormQkvRotaryStore");
#endif
  return ReferenceNormQkv(x, norm_weight, eps, wqkv, bqkv, rope, heads, cache, rows);
}

torch::Tensor CacheAttention(const torch::Tensor& q, const CacheLayer& cache, int64_t span,
                             const torch::Tensor& mask, FusedImpl impl) {
  bool qualifies = false;
#ifdef MULO_WITH_CUDA_KERNELS
  qualifies = AttentionQualifies(q, cache, span, mask);
  if (UseKernel(impl, qualifies, "CacheAttention")) return KernelAttention(q, cache, span, mask);
#else
  UseKernel(impl, qualifies, "CacheAttention");
#endif
  return ReferenceAttention(q, cache, span, mask);
}

torch::Tensor LinearResidual(const torch::Tensor& residual, const torch::Tensor& in,
                             const torch::Tensor& weight, FusedImpl impl) {
  bool qualifies = false;
#ifdef MULO_WITH_CUDA_KERNELS
  const torch::Tensor in2 = in.reshape({-1, in.size(-1)});
  qualifies = GemvQualifies(in2, weight) && residual.is_contiguous() &&
              residual.scalar_type() == in.scalar_type();
  if (UseKernel(impl, qualifies, "LinearResidual")) {
    auto out = torch::empty_like(residual);
    const auto out2 = out.view({-1, weight.size(0)});
    kernels::GemvArgs a = GemvOf(in2, weight, out2);
    a.epilogue = kernels::Epilogue::kResidual;
    a.residual = residual.data_ptr();
    a.residual_stride = out2.stride(0);
    Check(kernels::LaunchGemv(a, Stream()), "mulo::linear_residual");
    return out;
  }
#else
  UseKernel(impl, qualifies, "LinearResidual");
#endif
  return residual + torch::linear(in, weight);
}

torch::Tensor NormSwiGluInput(const torch::Tensor& h, const torch::Tensor& norm_weight, double eps,
                              const torch::Tensor& w1, const torch::Tensor& w3,
                              const torch::Tensor& w13, FusedImpl impl) {
  bool qualifies = false;
#ifdef MULO_WITH_CUDA_KERNELS
  const torch::Tensor h2 = h.reshape({-1, h.size(-1)});
  qualifies = w13.defined() && GemvQualifies(h2, w13) && norm_weight.is_contiguous() &&
              Aligned16(norm_weight.data_ptr());
  if (UseKernel(impl, qualifies, "NormSwiGluInput")) {
    const int64_t hidden = w13.size(0) / 2;
    auto out = torch::empty({h2.size(0), hidden}, h.options());
    kernels::GemvArgs a = GemvOf(h2, w13, out);
    a.prologue = kernels::Prologue::kRmsNorm;
    a.epilogue = kernels::Epilogue::kSiluMul;
    a.norm_weight = norm_weight.data_ptr();
    a.eps = static_cast<float>(eps);
    Check(kernels::LaunchGemv(a, Stream()), "mulo::norm_swiglu_input");
    std::vector<int64_t> sizes = h.sizes().vec();
    sizes.back() = hidden;
    return out.view(sizes);
  }
#else
  UseKernel(impl, qualifies, "NormSwiGluInput");
#endif
  return SwiGluInput(RmsNorm(h, norm_weight, eps), w1, w3, w13,
                     [](const torch::Tensor& in, const torch::Tensor& weight) {
                       return torch::linear(in, weight);
                     });
}

torch::Tensor GuidedDraw(const torch::Tensor& cond, const torch::Tensor& uncond,
                         const torch::Tensor& cfg, const torch::Tensor& temperature,
                         const torch::Tensor& uniforms, FusedImpl impl) {
  bool qualifies = false;
#ifdef MULO_WITH_CUDA_KERNELS
  qualifies = cond.is_cuda() && cond.scalar_type() == torch::kFloat32 &&
              uncond.scalar_type() == torch::kFloat32 && cond.dim() == 2 && cond.stride(1) == 1 &&
              uncond.strides() == cond.strides() && cfg.scalar_type() == torch::kFloat32 &&
              cfg.is_contiguous() && temperature.scalar_type() == torch::kFloat32 &&
              temperature.is_contiguous() && uniforms.scalar_type() == torch::kFloat64 &&
              uniforms.is_contiguous() && uniforms.is_cuda();
  if (UseKernel(impl, qualifies, "GuidedDraw")) {
    auto tokens = torch::empty({cond.size(0)}, cond.options().dtype(torch::kInt64));
    kernels::GuidedDrawArgs a;
    a.rows = static_cast<int>(cond.size(0));
    a.vocab = cond.size(1);
    a.cond = cond.data_ptr<float>();
    a.uncond = uncond.data_ptr<float>();
    a.stride = cond.stride(0);
    a.cfg = cfg.data_ptr<float>();
    a.temperature = temperature.data_ptr<float>();
    a.uniforms = uniforms.data_ptr<double>();
    a.tokens = tokens.data_ptr<int64_t>();
    Check(kernels::LaunchGuidedDraw(a, Stream()), "mulo::guided_draw");
    return tokens;
  }
#else
  UseKernel(impl, qualifies, "GuidedDraw");
#endif
  return DrawRows(GuidedProbabilities(cond, uncond, cfg.unsqueeze(-1), temperature.unsqueeze(-1)),
                  uniforms);
}

}  // namespace mulo::engine
