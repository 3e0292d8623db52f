// LlamaGen GPT / Tar AR-DTok decoder-only transformer for image tokens: the "llamagen"
// architecture (architectures.h).
//
// The weights use the upstream state_dict keys (tok_embeddings, layers.N.attention.wqkv, ...),
// so converted upstream checkpoints load unchanged. The model is immutable after loading and
// shared read-only by every request; all per-request state lives in a KvCache.
//
// Sequence layout: positions [0, cls_token_num) hold the condition embeddings; the image token
// with raster index i is fed at position cls_token_num + i, and the logits at position p
// predict raster index p - cls_token_num + 1 (so the last condition position predicts token 0).
// The forward itself is the shared decoder-only one (decoder_only_model.h); this class adds the
// condition modes (Tar's CLIP features, LlamaGen's class labels and captions) and positions.
#ifndef MULO_ENGINE_MODEL_TRANSFORMER_H_
#define MULO_ENGINE_MODEL_TRANSFORMER_H_

#include <torch/types.h>

#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/condition.h"
#include "engine/model/decoder_only_model.h"
#include "engine/model/transformer_config.h"

namespace mulo::engine {

class Transformer : public DecoderOnlyModel {
 public:
  // Reads `config` weights from a safetensors file, validating every key and shape.
  static StatusOr<std::shared_ptr<const Transformer>> Load(const TransformerConfig& config,
                                                           const std::string& weights_path,
                                                           const LoadOptions& options);
  // <dir>/config.json + <dir>/model.safetensors.
  static StatusOr<std::shared_ptr<const Transformer>> LoadDirectory(const std::string& dir,
                                                                    const LoadOptions& options);

  const TransformerConfig& config() const { return config_; }

  std::string architecture() const override { return "llamagen"; }
  int64_t grid_size() const override { return config_.grid_size; }
  const ConditionShape& condition_shape() const override { return condition_shape_; }
  int64_t CacheRows(int64_t condition_rows) const override;

  // Condition embeddings [batch, cls_token_num, dim] (a caption with caption_length k > 0:
  // the last k positions only). With `with_null`, row 1 is the null condition (CFG's
  // unconditional stream) and batch = 2; otherwise batch = 1.
  StatusOr<torch::Tensor> EmbedCondition(const Condition& condition,
                                         bool with_null) const override;
  // The last `rows` of [0, cls_token_num) (all of them unless a caption was left-padded).
  torch::Tensor ConditionPositions(int64_t rows) const override;
  // cls_token_num + raster_index, whatever the condition rows (positions stay absolute).
  int64_t TokenPosition(int64_t condition_rows, int64_t raster_index) const override;
  // The same for the full condition.
  int64_t TokenPosition(int64_t raster_index) const { return TokenPosition(0, raster_index); }

 private:
  explicit Transformer(TransformerConfig config) : config_(std::move(config)) {}
  Status LoadWeights(Checkpoint& checkpoint);

  TransformerConfig config_;
  ConditionShape condition_shape_;
  torch::Tensor clip_proj_w_, clip_proj_b_;                 // clip_cond
  torch::Tensor class_table_;                               // class_label
  torch::Tensor cap_fc1_w_, cap_fc1_b_, cap_fc2_w_, cap_fc2_b_, uncond_embedding_;  // caption
};

// LlamaGen's 2D RoPE table: [cls + grid^2, head_dim/2, 2] (cos, sin); the first half of the
// rotated pairs follow the row, the second half the column; condition rows are zero.
torch::Tensor Rope2dTable(int64_t grid, int64_t head_dim, double base, int64_t cls_token_num);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TRANSFORMER_H_
