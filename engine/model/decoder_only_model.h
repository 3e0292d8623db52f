// The forward every decoder-only architecture shares: the image-token embedding, position
// encoding (a learned table added to the input, or rotary rows applied to q and k), the blocks
// over a KV cache (block.h), the final RMSNorm and the output head, eager or replayed from CUDA
// graphs (forward_graphs.h), alone or packed with other requests' rows (ForwardBatch).
//
// An architecture derives from it, loads its tensors into the protected members, and supplies
// what differs: its condition (EmbedCondition, ConditionPositions) and where image tokens sit
// in its sequence (TokenPosition). transformer.h (LlamaGen / Tar), causal_lm.h (LLaMA /
// Qwen2) and janus_model.h (Janus-Pro) are the three.
#ifndef MULO_ENGINE_MODEL_DECODER_ONLY_MODEL_H_
#define MULO_ENGINE_MODEL_DECODER_ONLY_MODEL_H_

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"
#include "engine/model/kv_cache.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/token_model.h"

namespace mulo::engine {

class DecoderOnlyModel : public TokenModel {
 public:
  torch::TensorOptions options() const override { return tok_embeddings_.options(); }
  bool uses_cuda_graphs() const override { return cuda_graphs_; }
  int64_t dim() const override { return shape_.dim; }
  int64_t vocab_size() const override { return tok_embeddings_.size(0); }

  KvCache NewCache(int64_t batch, int64_t capacity) const override;
  StatusOr<std::shared_ptr<PoolGraphs>> CapturePoolGraphs(const KvPool& pool) const override;
  std::optional<RowGraphs::Model> StepGraphModel() const override;
  StatusOr<torch::Tensor> EmbedTokens(const torch::Tensor& tokens) const override;
  StatusOr<torch::Tensor> EmbedDrawnTokens(const torch::Tensor& tokens) const override;
  Status CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                      const torch::Tensor& positions, const torch::Tensor& mask) const override;
  StatusOr<ForwardOutput> Forward(KvCache& cache, const torch::Tensor& embeddings,
                                  const torch::Tensor& positions, const torch::Tensor& mask,
                                  LogitsMode logits_mode) const override;
  // With PackedGemms::kPerSequence, outputs[i] is what Forward(calls[i]...) returns, bit for
  // bit on a CPU in float32; with kShared (one GEMM per weight for all calls) the last bits may
  // differ (the README's tolerance policy). Every call is checked first; one bad call fails the
  // whole batch before any cache moves.
  StatusOr<std::vector<ForwardOutput>> ForwardBatch(const std::vector<ForwardCall>& calls,
                                                    PackedGemms gemms) const override;
  // When the cache has CUDA graphs (NewCache on a GPU with LoadOptions::cuda_graphs), repeated
  // shapes replay a captured graph instead of launching every kernel; the results are the same
  // function of the inputs, up to floating-point rounding. A cache over a pool's slots replays
  // the pool's graphs instead (pool_graphs.h), from its first forward; so do Forward and
  // ForwardBatch over such caches.
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions,
                                        LogitsMode logits_mode) const override;
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions, const torch::Tensor& mask,
                                        LogitsMode logits_mode) const override;
  StatusOr<ForwardOutput> ForwardDrawnTokens(KvCache& cache, const torch::Tensor& tokens,
                                             const torch::Tensor& positions,
                                             LogitsMode logits_mode) const override;
  Status CheckPrefill(const KvCache& cache,
                      const torch::Tensor& condition_embeddings) const override;
  torch::Tensor HeadLogits(const torch::Tensor& hidden) const override;
  const torch::Tensor& token_embedding_weight() const override { return tok_embeddings_; }

  // The graph-capturable append: fixed shapes, no host synchronisation, no checks. tokens
  // [batch, n] and positions [n] (int64, on the model's device); the new keys and values go to
  // cache rows first_row + [0, n) (first_row: [1] int64 on the device). Without a mask new row i
  // attends to cache rows [0, first_row + i] within [0, span); with one (bool [n, span] on the
  // device) exactly where it is true. The cache length does not move: the caller advances it.
  // The caller guarantees valid ids and positions and first_row + n <= span <= capacity.
  ForwardOutput ForwardStatic(KvCache& cache, const torch::Tensor& tokens,
                              const torch::Tensor& positions, const torch::Tensor& first_row,
                              int64_t span, const torch::Tensor& mask,
                              LogitsMode logits_mode) const;

 protected:
  DecoderOnlyModel() = default;

  // Graph settings from the load options (call once, before any cache is made).
  void SetGraphOptions(const LoadOptions& options);
  // `n_layer` blocks "layers.<i>." of `block_shape` from the checkpoint.
  Status LoadLayers(Checkpoint& checkpoint, int64_t n_layer, const BlockShape& block_shape);
  // Embeddings [batch, n, dim] of checked ids (no host synchronisation: graph-capturable).
  torch::Tensor EmbedCheckedTokens(const torch::Tensor& tokens) const;
  // Final norm and output head over the last layer's x [batch, n, dim].
  ForwardOutput Head(const torch::Tensor& x, LogitsMode logits_mode) const;
  // The layers over x [batch, n, dim] (positions applied; `mask` in the prepared form of
  // Block::PrepareMask), without the head.
  torch::Tensor RunBlocks(KvCache& cache, torch::Tensor x, const torch::Tensor& rope,
                          const torch::Tensor& mask, const torch::Tensor& rows,
                          int64_t span) const;
  // The causal mask's prepared form for n new rows after the cache's rows (undefined for one).
  torch::Tensor CausalMask(const KvCache& cache, int64_t n, const torch::Tensor& like) const;
  // The rotary rows of `positions` (undefined with a learned table) and x with a learned
  // table's rows added.
  torch::Tensor ApplyPositions(torch::Tensor* x, const torch::Tensor& positions) const;
  // Rows of the position table: positions must be in [0, this).
  int64_t position_rows() const {
    return abs_pe_.defined() ? abs_pe_.size(0) : rope_.size(0);
  }

  BlockShape shape_;             // every block's shape (dim, heads, FFN, norm eps)
  torch::Tensor tok_embeddings_;  // [vocab_size, dim]: the image tokens' rows
  torch::Tensor abs_pe_;          // [rows, dim] learned absolute positions (or undefined)
  torch::Tensor rope_;            // [rows, head_dim / 2, 2] rotary cos / sin (or undefined)
  std::vector<Block> layers_;
  torch::Tensor norm_;
  // The output head over final-norm hidden states h: linear(h, output_, output_bias_), or,
  // with head_hidden_ defined, linear(gelu(linear(h, head_hidden_, head_hidden_bias_)),
  // output_, output_bias_) (Janus-Pro's gen_head: Linear, exact GELU, Linear). Biases may be
  // undefined.
  torch::Tensor head_hidden_, head_hidden_bias_;  // [head width, dim], [head width]
  torch::Tensor output_;       // [vocab_size, dim or head width]
  torch::Tensor output_bias_;  // [vocab_size]

 private:
  // One call's inputs with positions applied: x [batch, n, dim] in the model's dtype, the RoPE
  // rows and the prepared attention mask (causal when `mask` is undefined).
  struct PreparedInput {
    torch::Tensor x, rope, mask;
  };
  PreparedInput Prepare(const KvCache& cache, const torch::Tensor& embeddings,
                        const torch::Tensor& positions, const torch::Tensor& mask) const;
  StatusOr<ForwardOutput> ForwardImpl(KvCache& cache, const torch::Tensor& embeddings,
                                      const torch::Tensor& positions, const torch::Tensor& mask,
                                      LogitsMode logits_mode) const;
  // The pool graphs' batched forward (PoolGraphs::Body): embeddings in, {hidden, logits}
  // out.
  std::vector<torch::Tensor> ForwardSlots(KvCache& view, const PoolGraphs::Inputs& in) const;
  // `calls` from their pool's graphs when every cache is a view of one pool that has graphs
  // and a captured key fits them; nullopt otherwise (nothing ran). The calls are checked.
  std::optional<StatusOr<std::vector<ForwardOutput>>> ForwardFromPoolGraphs(
      const std::vector<ForwardCall>& calls) const;
  // After an eager forward stored `n` new rows: the trace entry, then the cache's length.
  void CommitEager(KvCache& cache, int64_t n, int64_t dispatched_ops = 0) const;
  std::vector<ForwardOutput> ForwardBatchImpl(const std::vector<ForwardCall>& calls,
                                              PackedGemms gemms) const;
  // tokens: int64 [batch, n] (no read of the ids: drawn ids stay on the device unread).
  static Status CheckTokenShape(const torch::Tensor& tokens);
  // CheckTokenShape, and every id inside the vocabulary.
  Status CheckTokens(const torch::Tensor& tokens) const;
  StatusOr<ForwardOutput> ForwardRangeCheckedTokens(KvCache& cache, const torch::Tensor& tokens,
                                                    const torch::Tensor& positions,
                                                    const torch::Tensor& mask,
                                                    LogitsMode logits_mode) const;
  // positions: int64 [n], every entry inside the position table.
  Status CheckPositions(const torch::Tensor& positions, int64_t n) const;

  bool cuda_graphs_ = false;
  bool cuda_graph_buckets_ = true;
  bool emulate_cuda_graphs_ = false;
  bool fused_kernels_ = false;  // LoadOptions::fused_kernels: the layers' decode ops
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_DECODER_ONLY_MODEL_H_
