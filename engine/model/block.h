// One LlamaGen / Tar decoder block (RMSNorm -> fused-qkv attention -> residual, RMSNorm ->
// SwiGLU FFN -> residual), shared by the AR transformer, the text conditioner, the
// EAGLE-style drafter head and the causal language models (causal_lm.h). Keys under a prefix:
// attention.wqkv, attention.wo, feed_forward.{w1,w2,w3}, attention_norm, ffn_norm (all
// `.weight`), and attention.wqkv.bias with BlockShape::qkv_bias.
#ifndef MULO_ENGINE_MODEL_BLOCK_H_
#define MULO_ENGINE_MODEL_BLOCK_H_

#include <torch/types.h>

#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/kv_cache.h"
#include "engine/model/layer_math.h"
#include "engine/model/packed_gemms.h"

namespace mulo::engine {

struct BlockShape {
  int64_t dim = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t ffn_hidden_dim = 0;
  double norm_eps = 1e-5;
  bool qkv_bias = false;  // attention.wqkv.bias (Qwen2); LlamaGen and Tar have none

  int64_t head_dim() const { return dim / n_head; }
};

// One sequence's rows inside a packed forward (Block::ForwardPacked): `batch` guidance
// streams of `length` new positions, stored in `cache`, with their own RoPE rows and
// attention mask (in the prepared form, see Block::PrepareMask).
struct PackedSequence {
  KvCache* cache = nullptr;
  int64_t batch = 0;
  int64_t length = 0;
  torch::Tensor rope;
  torch::Tensor mask;
};

// The checks every batched forward over caches makes (Transformer::ForwardBatch,
// EagleHead::ForwardBatch): no two calls may share a cache; `caller` names the error.
Status CheckDistinctCaches(const std::vector<const KvCache*>& caches, const std::string& caller);

class Block {
 public:
  // Reads the block's weights stored under `prefix` (e.g. "layers.3.").
  static StatusOr<Block> Load(Checkpoint& checkpoint, const std::string& prefix,
                              const BlockShape& shape);

  // x [B, n, dim] -> [B, n, dim].
  //   rope:  optional [n, head_dim/2, 2] cos/sin rows for the new positions (2D RoPE), or
  //          [B, n, head_dim/2, 2] per stream
  //   mask:  optional, prepared (PrepareMask): [n, keys], or [B, 1, n, keys] per stream
  //   cache: when set, the new keys/values are stored as layer `layer` of the cache and the
  //          queries attend over every cached row plus the new ones; when null, attention is
  //          over the new rows only (bidirectional encoders).
  //   rows, span: graph-safe cache addressing (KvCache::StoreAt): the new keys/values go to
  //          cache rows `rows` [n] ([B, n] on a slot-indexed view of a pool) and the queries
  //          read cache rows [0, span) under `mask`; undefined `rows` appends at the cache
  //          length instead.
  torch::Tensor Forward(const torch::Tensor& x, const torch::Tensor& rope,
                        const torch::Tensor& mask, KvCache* cache, int64_t layer,
                        const torch::Tensor& rows = torch::Tensor(), int64_t span = 0) const;

  // Several sequences' forwards at once: x [sum of batch * length, dim] holds each sequence's
  // rows ([batch, length] flattened) one after another. With kPerSequence each sequence's rows
  // come out bit for bit as its own Forward returns them on a CPU in float32.
  torch::Tensor ForwardPacked(const torch::Tensor& x, const std::vector<PackedSequence>& sequences,
                              int64_t layer, PackedGemms gemms) const;

  // The form of a boolean attention mask [n, keys] that Forward takes: an additive mask in
  // x's dtype (0 where attending, -inf elsewhere), built once per forward rather than in
  // every layer; undefined stays undefined.
  static torch::Tensor PrepareMask(const torch::Tensor& mask, const torch::Tensor& x);
  // INVALID_ARGUMENT naming `mask` unless it is undefined or bool [n, keys].
  static Status CheckMask(const torch::Tensor& mask, int64_t n, int64_t keys);

  // Forwards through a cache run the fused decode ops (LoadOptions::fused_kernels).
  void set_fused_kernels(bool on) { fused_kernels_ = on; }

 private:
  // Attention of one sequence from its fused projections qkv [B, n, (H + 2 KV) hd] to the
  // attended values [B, n, dim], before the output projection.
  torch::Tensor Attend(const torch::Tensor& qkv, const torch::Tensor& rope,
                       const torch::Tensor& mask, KvCache* cache, int64_t layer,
                       const torch::Tensor& rows, int64_t span) const;
  // h + SwiGLU(RMSNorm(h)), the block's second half.
  torch::Tensor FeedForward(torch::Tensor h, const RowLinear& linear) const;
  // Forward through `cache` by the fused ops (engine/kernels/fused_ops.h): the same rows,
  // slots and mask as Forward, the layer in five ops.
  torch::Tensor ForwardFused(const torch::Tensor& x, const torch::Tensor& rope,
                             const torch::Tensor& mask, KvCache& cache, int64_t layer,
                             const torch::Tensor& rows, int64_t span) const;

  BlockShape shape_;
  torch::Tensor wqkv_, wo_, w1_, w2_, w3_, attention_norm_, ffn_norm_;
  torch::Tensor bqkv_;  // undefined without qkv_bias
  torch::Tensor w13_;  // CUDA: [w1; w3] stacked (one GEMM), w1_ and w3_ then empty
  bool fused_kernels_ = false;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_BLOCK_H_
