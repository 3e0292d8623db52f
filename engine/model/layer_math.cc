#include "engine/model/layer_math.h"

#include <torch/version.h>

#include <cmath>
#include <optional>

// LibTorch 2 has fused RMSNorm and scaled-dot-product attention kernels; LibTorch 1.13
// (Debian's, the CPU build) has neither, and the CPU path keeps the reference arithmetic.
#if TORCH_VERSION_MAJOR >= 2
#define MULO_FUSED_TORCH_KERNELS 1
#endif

namespace mulo::engine {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
#ifdef MULO_FUSED_TORCH_KERNELS
  if (x.is_cuda()) return at::rms_norm(x, {x.size(-1)}, weight, eps);
#endif
  auto xf = x.to(torch::kFloat32);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& freqs) {
  auto xs = x.to(torch::kFloat32).reshape({x.size(0), x.size(1), x.size(2), -1, 2});
  // One table row per new position, or per stream and position ([B, n, hd/2, 2]: a batched
  // graph's streams sit at positions of their own).
  auto f = freqs.dim() == 4 ? freqs.view({xs.size(0), xs.size(1), 1, xs.size(3), 2})
                            : freqs.view({1, xs.size(1), 1, xs.size(3), 2});
  auto x0 = xs.select(-1, 0), x1 = xs.select(-1, 1);
  auto cos = f.select(-1, 0), sin = f.select(-1, 1);
  auto out = torch::stack({x0 * cos - x1 * sin, x1 * cos + x0 * sin}, -1);
  return out.flatten(3).to(x.scalar_type());
}

QkvHeads SplitQkv(const torch::Tensor& qkv, const torch::Tensor& rope, int64_t n_head,
                  int64_t n_kv_head, int64_t head_dim) {
  const int64_t b = qkv.size(0), n = qkv.size(1), hd = head_dim;
  auto parts = qkv.split_with_sizes({n_head * hd, n_kv_head * hd, n_kv_head * hd}, -1);
  QkvHeads heads{parts[0].view({b, n, n_head, hd}), parts[1].view({b, n, n_kv_head, hd}),
                 parts[2].view({b, n, n_kv_head, hd})};
  if (rope.defined()) {
    // q and k are adjacent in qkv: one rotation over both heads' sets (the same arithmetic
    // per element) launches half the kernels of one per tensor (7 instead of 14 per layer).
    const auto qk = ApplyRotary(
        qkv.narrow(-1, 0, (n_head + n_kv_head) * hd).view({b, n, n_head + n_kv_head, hd}), rope);
    heads.q = qk.narrow(2, 0, n_head);
    heads.k = qk.narrow(2, n_head, n_kv_head);
  }
  return heads;
}

torch::Tensor AttendKeys(const torch::Tensor& q, torch::Tensor keys, torch::Tensor values,
                         const torch::Tensor& mask) {
  const int64_t b = q.size(0), heads = q.size(1), n = q.size(2), hd = q.size(3);
  if (keys.size(1) != heads) {
    const int64_t rep = heads / keys.size(1);
    keys = keys.repeat_interleave(rep, 1);
    values = values.repeat_interleave(rep, 1);
  }
#ifdef MULO_FUSED_TORCH_KERNELS
  if (q.is_cuda()) {
    // One fused kernel over the additive mask.
    auto attended = at::scaled_dot_product_attention(
        q, keys, values, mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt);
    return attended.transpose(1, 2).reshape({b, n, heads * hd});
  }
#endif
  auto scores = torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
  if (mask.defined()) scores = scores + mask;
  auto probs = torch::softmax(scores.to(torch::kFloat32), -1).to(q.scalar_type());
  return torch::matmul(probs, values).transpose(1, 2).reshape({b, n, heads * hd});
}

torch::Tensor SwiGluInput(const torch::Tensor& f, const torch::Tensor& w1, const torch::Tensor& w3,
                          const torch::Tensor& w13, const RowLinear& linear) {
  if (!w13.defined()) return torch::silu(linear(f, w1)) * linear(f, w3);
  const auto gate_up = linear(f, w13).chunk(2, -1);
  return torch::silu(gate_up[0]) * gate_up[1];
}

}  // namespace mulo::engine
