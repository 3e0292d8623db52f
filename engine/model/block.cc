#include "engine/model/block.h"

#include <cmath>

namespace mulo::engine {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  auto xf = x.to(torch::kFloat32);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& freqs) {
  auto xs = x.to(torch::kFloat32).reshape({x.size(0), x.size(1), x.size(2), -1, 2});
  auto f = freqs.view({1, xs.size(1), 1, xs.size(3), 2});
  auto x0 = xs.select(-1, 0), x1 = xs.select(-1, 1);
  auto cos = f.select(-1, 0), sin = f.select(-1, 1);
  auto out = torch::stack({x0 * cos - x1 * sin, x1 * cos + x0 * sin}, -1);
  return out.flatten(3).to(x.scalar_type());
}

StatusOr<Block> Block::Load(Checkpoint& ckpt, const std::string& p, const BlockShape& s) {
  Block b;
  b.shape_ = s;
  const int64_t d = s.dim, hidden = s.ffn_hidden_dim;
  const int64_t qkv = (s.n_head + 2 * s.n_kv_head) * s.head_dim();
  MULO_ASSIGN_OR_RETURN(b.wqkv_, ckpt.Get(p + "attention.wqkv.weight", {qkv, d}));
  MULO_ASSIGN_OR_RETURN(b.wo_, ckpt.Get(p + "attention.wo.weight", {d, d}));
  MULO_ASSIGN_OR_RETURN(b.w1_, ckpt.Get(p + "feed_forward.w1.weight", {hidden, d}));
  MULO_ASSIGN_OR_RETURN(b.w3_, ckpt.Get(p + "feed_forward.w3.weight", {hidden, d}));
  MULO_ASSIGN_OR_RETURN(b.w2_, ckpt.Get(p + "feed_forward.w2.weight", {d, hidden}));
  MULO_ASSIGN_OR_RETURN(b.attention_norm_, ckpt.Get(p + "attention_norm.weight", {d}));
  MULO_ASSIGN_OR_RETURN(b.ffn_norm_, ckpt.Get(p + "ffn_norm.weight", {d}));
  return b;
}

torch::Tensor Block::Attention(const torch::Tensor& x, const torch::Tensor& rope,
                               const torch::Tensor& mask, KvCache* cache, int64_t layer) const {
  const auto& s = shape_;
  const int64_t b = x.size(0), n = x.size(1), hd = s.head_dim();
  auto parts = torch::linear(x, wqkv_).split_with_sizes(
      {s.n_head * hd, s.n_kv_head * hd, s.n_kv_head * hd}, -1);
  auto q = parts[0].view({b, n, s.n_head, hd});
  auto k = parts[1].view({b, n, s.n_kv_head, hd});
  auto v = parts[2].view({b, n, s.n_kv_head, hd});
  if (rope.defined()) {
    q = ApplyRotary(q, rope);
    k = ApplyRotary(k, rope);
  }
  q = q.transpose(1, 2);
  torch::Tensor keys = k.transpose(1, 2), values = v.transpose(1, 2);
  if (cache != nullptr) std::tie(keys, values) = cache->Store(layer, keys, values);
  if (s.n_kv_head != s.n_head) {
    const int64_t rep = s.n_head / s.n_kv_head;
    keys = keys.repeat_interleave(rep, 1);
    values = values.repeat_interleave(rep, 1);
  }
  auto scores = torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
  if (mask.defined()) scores = scores.masked_fill(mask.logical_not(), -INFINITY);
  auto probs = torch::softmax(scores.to(torch::kFloat32), -1).to(q.scalar_type());
  auto out = torch::matmul(probs, values).transpose(1, 2).reshape({b, n, s.dim});
  return torch::linear(out, wo_);
}

torch::Tensor Block::Forward(const torch::Tensor& x, const torch::Tensor& rope,
                             const torch::Tensor& mask, KvCache* cache, int64_t layer) const {
  auto h = x + Attention(RmsNorm(x, attention_norm_, shape_.norm_eps), rope, mask, cache, layer);
  auto f = RmsNorm(h, ffn_norm_, shape_.norm_eps);
  return h + torch::linear(torch::silu(torch::linear(f, w1_)) * torch::linear(f, w3_), w2_);
}

}  // namespace mulo::engine
