// LlamaGen GPT / Tar AR-DTok decoder-only transformer for image tokens.
//
// The weights use the upstream state_dict keys (tok_embeddings, layers.N.attention.wqkv, ...),
// so converted upstream checkpoints load unchanged. The model is immutable after loading and
// shared read-only by every request; all per-request state lives in a KvCache.
//
// Sequence layout: positions [0, cls_token_num) hold the condition embeddings; the image token
// with raster index i is fed at position cls_token_num + i, and the logits at position p
// predict raster index p - cls_token_num + 1 (so the last condition position predicts token 0).
#ifndef MULO_ENGINE_MODEL_TRANSFORMER_H_
#define MULO_ENGINE_MODEL_TRANSFORMER_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"
#include "engine/model/condition.h"
#include "engine/model/kv_cache.h"
#include "engine/model/transformer_config.h"

namespace mulo::engine {

enum class LogitsMode {
  kAll,   // logits for every new position
  kLast,  // logits for the last new position only (prefill)
  kNone,  // hidden states only
};

struct ForwardOutput {
  torch::Tensor logits;  // [batch, n or 1, vocab] float32 (undefined for kNone)
  torch::Tensor hidden;  // [batch, n, dim]: final-norm output, the input of `output`
};

// One cache's forward inside Transformer::ForwardBatch: the arguments of Forward.
struct ForwardCall {
  KvCache* cache = nullptr;
  torch::Tensor embeddings;  // [cache batch, n, dim]
  torch::Tensor positions;   // [n] int64
  torch::Tensor mask;        // optional [n, cache length + n] bool (undefined: causal)
  LogitsMode logits_mode = LogitsMode::kAll;
};

class Transformer {
 public:
  // Reads `config` weights from a safetensors file, validating every key and shape.
  static StatusOr<std::shared_ptr<const Transformer>> Load(const TransformerConfig& config,
                                                           const std::string& weights_path,
                                                           const LoadOptions& options);
  // <dir>/config.json + <dir>/model.safetensors.
  static StatusOr<std::shared_ptr<const Transformer>> LoadDirectory(const std::string& dir,
                                                                    const LoadOptions& options);

  const TransformerConfig& config() const { return config_; }
  torch::TensorOptions options() const { return tok_embeddings_.options(); }

  // An empty cache for `batch` streams (2 for classifier-free guidance).
  KvCache NewCache(int64_t batch, int64_t capacity) const;

  // Condition embeddings [batch, cls_token_num, dim] (a caption with caption_length k > 0:
  // the last k positions only). With `with_null`, row 1 is the null condition (CFG's
  // unconditional stream) and batch = 2; otherwise batch = 1.
  StatusOr<torch::Tensor> EmbedCondition(const Condition& condition, bool with_null) const;

  // Token embeddings [batch, n, dim] of ids [batch, n].
  StatusOr<torch::Tensor> EmbedTokens(const torch::Tensor& tokens) const;

  // Appends n new positions to `cache` and returns their outputs.
  //   embeddings:   [batch, n, dim] (from EmbedCondition / EmbedTokens)
  //   positions:    [n] int64, the sequence position of each new row (abs_pe row / RoPE row)
  //   mask:         optional [n, cache.length() + n] bool, true where a new row may attend;
  //                 undefined means causal (all cached rows plus earlier new rows)
  StatusOr<ForwardOutput> Forward(KvCache& cache, const torch::Tensor& embeddings,
                                  const torch::Tensor& positions, const torch::Tensor& mask,
                                  LogitsMode logits_mode) const;

  // Forward's checks alone (INVALID_ARGUMENT / OUT_OF_RANGE naming the argument), for callers
  // that queue a forward to run later (ForwardBatcher) and must refuse a bad one at once.
  Status CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                      const torch::Tensor& positions, const torch::Tensor& mask) const;

  // Several caches' forwards in one pass (continuous batching): the rows of every call go
  // through the norms and activations together, attention runs per call over its own cache,
  // and the GEMMs run as `gemms` says. With PackedGemms::kPerSequence, outputs[i] is what
  // Forward(calls[i]...) returns, bit for bit on a CPU in float32; with kShared (one GEMM per
  // weight for all calls) the last bits may differ (the README's tolerance policy). Every
  // call is checked first; one bad call fails the whole batch before any cache moves.
  StatusOr<std::vector<ForwardOutput>> ForwardBatch(const std::vector<ForwardCall>& calls,
                                                    PackedGemms gemms) const;

  // Convenience: EmbedTokens + Forward with causal attention. When the cache has CUDA graphs
  // (NewCache on a GPU with LoadOptions::cuda_graphs), repeated shapes replay a captured
  // graph instead of launching every kernel (forward_graphs.h); the results are the same
  // function of the inputs, up to floating-point rounding.
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions,
                                        LogitsMode logits_mode) const;
  // The same with an attention mask (optional [n, cache.length() + n] bool, as in Forward): a
  // draft tree or a window of rows. With graph buckets (LoadOptions::cuda_graph_buckets) these
  // replay captured graphs too.
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions, const torch::Tensor& mask,
                                        LogitsMode logits_mode) const;

  // ForwardTokens and EmbedTokens for ids the engine drew itself on the model's device
  // (engine/sampling/row_sampler.h: an argmax or an inverse-CDF index, always in [0, vocab)).
  // Their range is not checked: reading ids back to check them would cost a host
  // synchronisation per forward on a GPU, the very read that keeping them on the device saves.
  StatusOr<ForwardOutput> ForwardDrawnTokens(KvCache& cache, const torch::Tensor& tokens,
                                             const torch::Tensor& positions,
                                             LogitsMode logits_mode) const;
  StatusOr<torch::Tensor> EmbedDrawnTokens(const torch::Tensor& tokens) const;

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

  // Whether NewCache attaches CUDA graphs (a CUDA model loaded with cuda_graphs on).
  bool uses_cuda_graphs() const { return cuda_graphs_; }

  // Prefill's checks alone: an empty cache, 1..cls_token_num condition rows.
  Status CheckPrefill(const KvCache& cache, const torch::Tensor& condition_embeddings) const;

  // The sequence positions Prefill feeds `rows` condition rows at (the last `rows` of
  // [0, cls_token_num)).
  torch::Tensor ConditionPositions(int64_t rows) const;

  // Condition positions into an empty cache: embeddings [batch, n, dim] fill the last n of
  // [0, cls_token_num) (n = cls_token_num unless a caption was shortened), so the cache holds
  // n condition rows before raster token 0.
  StatusOr<ForwardOutput> Prefill(KvCache& cache, const torch::Tensor& condition_embeddings,
                                  LogitsMode logits_mode) const;

  // Sequence position at which the image token with raster index i is fed.
  int64_t TokenPosition(int64_t raster_index) const {
    return config_.cls_token_num + raster_index;
  }

  // The output head [vocab, dim] (EAGLE-style drafters reuse it).
  const torch::Tensor& output_weight() const { return output_; }
  const torch::Tensor& token_embedding_weight() const { return tok_embeddings_; }

 private:
  explicit Transformer(TransformerConfig config) : config_(std::move(config)) {}
  Status LoadWeights(Checkpoint& checkpoint);
  StatusOr<ForwardOutput> ForwardImpl(KvCache& cache, const torch::Tensor& embeddings,
                                      const torch::Tensor& positions, const torch::Tensor& mask,
                                      LogitsMode logits_mode) const;
  // One call's inputs with positions applied: x [batch, n, dim] in the model's dtype, the RoPE
  // rows (rope_2d) and the prepared attention mask (causal when `mask` is undefined).
  struct PreparedInput {
    torch::Tensor x, rope, mask;
  };
  PreparedInput Prepare(const KvCache& cache, const torch::Tensor& embeddings,
                        const torch::Tensor& positions, const torch::Tensor& mask) const;
  // Final norm and output head over the last layer's x [batch, n, dim].
  ForwardOutput Head(const torch::Tensor& x, LogitsMode logits_mode) const;
  // After an eager forward stored `n` new rows: the trace entry, then the cache's length.
  void CommitEager(KvCache& cache, int64_t n, int64_t dispatched_ops = 0) const;
  std::vector<ForwardOutput> ForwardBatchImpl(const std::vector<ForwardCall>& calls,
                                              PackedGemms gemms) const;
  // The layers, final norm and output head over x [batch, n, dim] (positions applied; `mask`
  // in the prepared form of Block::PrepareMask).
  ForwardOutput RunLayers(KvCache& cache, torch::Tensor x, const torch::Tensor& rope,
                          const torch::Tensor& mask, const torch::Tensor& rows, int64_t span,
                          LogitsMode logits_mode) const;
  // tokens: int64 [batch, n] (no read of the ids: drawn ids stay on the device unread).
  static Status CheckTokenShape(const torch::Tensor& tokens);
  // CheckTokenShape, and every id inside the vocabulary.
  Status CheckTokens(const torch::Tensor& tokens) const;
  // Embeddings [batch, n, dim] of checked ids (no host synchronisation: graph-capturable).
  torch::Tensor EmbedCheckedTokens(const torch::Tensor& tokens) const;
  // ForwardTokens after the ids' range check (or without it, for drawn ids).
  StatusOr<ForwardOutput> ForwardRangeCheckedTokens(KvCache& cache, const torch::Tensor& tokens,
                                                    const torch::Tensor& positions,
                                                    const torch::Tensor& mask,
                                                    LogitsMode logits_mode) const;
  // positions: int64 [n], every entry inside the position table.
  Status CheckPositions(const torch::Tensor& positions, int64_t n) const;

  TransformerConfig config_;
  bool cuda_graphs_ = false;
  bool cuda_graph_buckets_ = true;
  bool emulate_cuda_graphs_ = false;
  torch::Tensor tok_embeddings_;
  torch::Tensor abs_pe_;     // [max_positions, dim] (abs_pe mode)
  torch::Tensor rope_;       // [cls + grid^2, head_dim / 2, 2] cos/sin (rope_2d mode)
  torch::Tensor clip_proj_w_, clip_proj_b_;                 // clip_cond
  torch::Tensor class_table_;                               // class_label
  torch::Tensor cap_fc1_w_, cap_fc1_b_, cap_fc2_w_, cap_fc2_b_, uncond_embedding_;  // caption
  std::vector<Block> layers_;
  torch::Tensor norm_;
  torch::Tensor output_;
};

// A caption_length (Condition::caption_length) the model can take: 0, or in
// [1, cls_token_num] on a caption model. INVALID_ARGUMENT naming "caption_length" otherwise.
Status CheckCaptionLength(const TransformerConfig& config, int64_t caption_length);
// A class id a class_label (LlamaGen c2i) model can take: [0, num_classes). INVALID_ARGUMENT
// naming "class_label" otherwise, and on models of other condition modes.
Status CheckClassLabel(const TransformerConfig& config, int64_t class_label);

// LlamaGen's 2D RoPE table: [cls + grid^2, head_dim/2, 2] (cos, sin); the first half of the
// rotated pairs follow the row, the second half the column; condition rows are zero.
torch::Tensor Rope2dTable(int64_t grid, int64_t head_dim, double base, int64_t cls_token_num);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TRANSFORMER_H_
