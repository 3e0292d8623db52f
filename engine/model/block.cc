#include "engine/model/block.h"

#include <string>

#include "engine/kernels/fused_ops.h"
#include "engine/model/safetensors.h"

namespace mulo::engine {

StatusOr<Block> Block::Load(Checkpoint& ckpt, const std::string& p, const BlockShape& s) {
  Block b;
  b.shape_ = s;
  const int64_t d = s.dim, hidden = s.ffn_hidden_dim;
  const int64_t qkv = (s.n_head + 2 * s.n_kv_head) * s.head_dim();
  MULO_ASSIGN_OR_RETURN(b.wqkv_, ckpt.Get(p + "attention.wqkv.weight", {qkv, d}));
  if (s.qkv_bias) {
    MULO_ASSIGN_OR_RETURN(b.bqkv_, ckpt.Get(p + "attention.wqkv.bias", {qkv}));
  }
  MULO_ASSIGN_OR_RETURN(b.wo_, ckpt.Get(p + "attention.wo.weight", {d, d}));
  MULO_ASSIGN_OR_RETURN(b.w1_, ckpt.Get(p + "feed_forward.w1.weight", {hidden, d}));
  MULO_ASSIGN_OR_RETURN(b.w3_, ckpt.Get(p + "feed_forward.w3.weight", {hidden, d}));
  MULO_ASSIGN_OR_RETURN(b.w2_, ckpt.Get(p + "feed_forward.w2.weight", {d, hidden}));
  MULO_ASSIGN_OR_RETURN(b.attention_norm_, ckpt.Get(p + "attention_norm.weight", {d}));
  MULO_ASSIGN_OR_RETURN(b.ffn_norm_, ckpt.Get(p + "ffn_norm.weight", {d}));
  if (b.w1_.is_cuda()) {
    // One GEMM for both FFN inputs on a GPU: a small forward costs its launches. Not on the
    // CPU: there the stacked GEMM made ar 1.2x slower per image (OpenBLAS, 3 interleaved runs
    // against two GEMMs), though it saves one operator per layer.
    at::NoGradGuard no_grad;
    b.w13_ = torch::cat({b.w1_, b.w3_});
    b.w1_ = torch::Tensor();
    b.w3_ = torch::Tensor();
  }
  return b;
}

Status CheckDistinctCaches(const std::vector<const KvCache*>& caches, const std::string& caller) {
  for (size_t i = 0; i < caches.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (caches[j] == caches[i]) {
        return InvalidArgumentError(caller + ": calls " + std::to_string(j) + " and " +
                                    std::to_string(i) + " share a cache");
      }
    }
  }
  return OkStatus();
}

Status Block::CheckMask(const torch::Tensor& mask, int64_t n, int64_t keys) {
  if (mask.defined() && (mask.dim() != 2 || mask.size(0) != n || mask.size(1) != keys ||
                         mask.scalar_type() != torch::kBool)) {
    return InvalidArgumentError("mask: expected bool [" + std::to_string(n) + ", " +
                                std::to_string(keys) + "], found " +
                                ShapeToString(mask.sizes().vec()));
  }
  return OkStatus();
}

torch::Tensor Block::PrepareMask(const torch::Tensor& mask, const torch::Tensor& x) {
  if (!mask.defined()) return mask;
  // Additive (0 / -inf), built once for every layer: SDPA would convert a boolean mask in
  // each layer, and the unfused path would invert it in each layer.
  return torch::zeros(mask.sizes(), x.options().dtype(torch::kFloat32))
      .masked_fill(mask.logical_not(), -INFINITY)
      .to(x.scalar_type());
}

torch::Tensor Block::Attend(const torch::Tensor& qkv, const torch::Tensor& rope,
                            const torch::Tensor& mask, KvCache* cache, int64_t layer,
                            const torch::Tensor& rows, int64_t span) const {
  const auto& s = shape_;
  const QkvHeads heads = SplitQkv(qkv, rope, s.n_head, s.n_kv_head, s.head_dim());
  const torch::Tensor q = heads.q.transpose(1, 2);
  torch::Tensor keys = heads.k.transpose(1, 2), values = heads.v.transpose(1, 2);
  if (cache != nullptr) {
    std::tie(keys, values) = rows.defined() ? cache->StoreAt(layer, rows, keys, values, span)
                                            : cache->Store(layer, keys, values);
  }
  return AttendKeys(q, keys, values, mask);
}

torch::Tensor Block::FeedForward(torch::Tensor h, const RowLinear& linear) const {
  const auto g = SwiGluInput(RmsNorm(h, ffn_norm_, shape_.norm_eps), w1_, w3_, w13_, linear);
  if (!w13_.defined()) return h.add_(linear(g, w2_));  // CPU: the residual added in place
  // CUDA: fused FFN inputs, the residual added by the GEMM (beta = 1): one kernel fewer.
  h.view({-1, shape_.dim}).addmm_(g.view({-1, g.size(-1)}), w2_.t());
  return h;
}

torch::Tensor Block::Forward(const torch::Tensor& x, const torch::Tensor& rope,
                             const torch::Tensor& mask, KvCache* cache, int64_t layer,
                             const torch::Tensor& rows, int64_t span) const {
  if (fused_kernels_ && cache != nullptr) {
    return ForwardFused(x, rope, mask, *cache, layer, rows, span);
  }
  auto qkv = torch::linear(RmsNorm(x, attention_norm_, shape_.norm_eps), wqkv_, bqkv_);
  auto h = x + torch::linear(Attend(qkv, rope, mask, cache, layer, rows, span), wo_);
  return FeedForward(std::move(h), [](const torch::Tensor& in, const torch::Tensor& weight) {
    return torch::linear(in, weight);
  });
}

torch::Tensor Block::ForwardFused(const torch::Tensor& x, const torch::Tensor& rope,
                                  const torch::Tensor& mask, KvCache& cache, int64_t layer,
                                  const torch::Tensor& rows, int64_t span) const {
  const NewRows new_rows{rows, cache.length()};
  if (!rows.defined()) {  // an eager append: Store's rows and span
    cache.Reserve(x.size(1));
    span = cache.length() + x.size(1);
  }
  const KvCache::LayerStorage storage = cache.Storage(layer);
  const CacheLayer own{storage.keys, storage.values, storage.slot_index};
  const HeadLayout heads{shape_.n_head, shape_.n_kv_head, shape_.head_dim()};
  const torch::Tensor q = NormQkvRotaryStore(x, attention_norm_, shape_.norm_eps, wqkv_, bqkv_,
                                             rope, heads, own, new_rows);
  const torch::Tensor h = LinearResidual(x, CacheAttention(q, own, span, mask), wo_);
  return LinearResidual(h, NormSwiGluInput(h, ffn_norm_, shape_.norm_eps, w1_, w3_, w13_), w2_);
}

torch::Tensor Block::ForwardPacked(const torch::Tensor& x,
                                   const std::vector<PackedSequence>& sequences, int64_t layer,
                                   PackedGemms gemms) const {
  // Norms and activations treat rows independently, so they run once over every sequence's
  // rows; attention reads each sequence's own cache, so it runs per sequence, on exactly the
  // tensors a lone Forward would build. GEMMs run over all rows at once (kShared) or over each
  // sequence's rows (kPerSequence): a BLAS picks its kernel by the row count (OpenBLAS computes
  // 1-6 rows with other kernels than many rows), so only a GEMM of the sequence's own rows
  // gives a lone forward's bits.
  const RowLinear linear = [&](const torch::Tensor& in, const torch::Tensor& weight) {
    if (gemms == PackedGemms::kShared) return torch::linear(in, weight);
    std::vector<torch::Tensor> parts;
    parts.reserve(sequences.size());
    int64_t offset = 0;
    for (const PackedSequence& seq : sequences) {
      const int64_t count = seq.batch * seq.length;
      parts.push_back(torch::linear(in.narrow(0, offset, count), weight));
      offset += count;
    }
    return torch::cat(parts);
  };
  auto qkv = linear(RmsNorm(x, attention_norm_, shape_.norm_eps), wqkv_);
  if (bqkv_.defined()) qkv = qkv + bqkv_;
  std::vector<torch::Tensor> attended;
  attended.reserve(sequences.size());
  int64_t offset = 0;
  for (const PackedSequence& seq : sequences) {
    const int64_t count = seq.batch * seq.length;
    auto own = qkv.narrow(0, offset, count).view({seq.batch, seq.length, qkv.size(-1)});
    attended.push_back(Attend(own, seq.rope, seq.mask, seq.cache, layer, torch::Tensor(), 0)
                           .view({count, shape_.dim}));
    offset += count;
  }
  auto h = x + linear(torch::cat(attended), wo_);
  return FeedForward(std::move(h), linear);
}

}  // namespace mulo::engine
