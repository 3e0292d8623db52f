// Janus-Pro's image generation path (DeepSeek; deepseek-ai/Janus), in the component layout
// tools/convert/hf_janus.py writes from the Hugging Face directory: config.json {architecture
// "janus", the LLaMA's fields as causal_lm.h reads them, image_token_count (16,384 codes),
// image_embed_dim (gen_embed's width, 8), aligner_depth, head_hidden_dim (gen_head's
// image_token_embed), pad_id} and model.safetensors with the engine's block keys (block.h), the
// text embedding, the final norm and the generation tensors under upstream's names:
// gen_embed.weight, gen_aligner.layers.{0,2,..}.{weight,bias},
// gen_head.output_mlp_projector.{weight,bias}, gen_head.vision_head.{weight,bias}.
//
// One LLaMA reads the prompt's text ids (the text embedding) at positions [0, n), then the image
// codes in raster order at n + raster index. An image code k enters as gen_aligner(gen_embed(k))
// (an MLP of depth aligner_depth, exact GELU between its Linears), computed once for every
// code at load: the image-token table every method embeds through. Image logits are gen_head
// over the final-norm hidden state (Linear, GELU, Linear with biases), not the text head, which
// is not loaded.
//
// Guidance as upstream's generation script builds it: the unconditional row is the prompt's
// ids with every position but the first and the last replaced by pad_id.
// Reference: tools/reference/janus.py (tests/engine/model/janus_parity_test.cc).
#ifndef MULO_ENGINE_MODEL_JANUS_MODEL_H_
#define MULO_ENGINE_MODEL_JANUS_MODEL_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/causal_lm.h"
#include "engine/model/checkpoint.h"
#include "engine/model/decoder_only_model.h"

namespace mulo::engine {

struct JanusConfig {
  CausalLmConfig language;     // architecture "janus"
  int64_t image_token_count = 0;  // gen_embed's rows: the VQ codebook
  int64_t image_embed_dim = 0;    // gen_embed's width
  int64_t aligner_depth = 0;      // gen_aligner's Linears
  int64_t head_hidden_dim = 0;    // gen_head's first Linear's width
  int64_t pad_id = 0;             // the guidance row's filler (<｜▁pad▁｜>)
};

StatusOr<JanusConfig> LoadJanusConfig(const std::string& path);

class JanusModel : public DecoderOnlyModel {
 public:
  // <dir>/config.json + <dir>/model.safetensors, writing grid_size^2 image codes.
  static StatusOr<std::shared_ptr<const JanusModel>> LoadDirectory(const std::string& dir,
                                                                    const LoadOptions& options,
                                                                    int64_t grid_size);

  const JanusConfig& config() const { return config_; }

  std::string architecture() const override { return "janus"; }
  int64_t grid_size() const override { return grid_size_; }
  const ConditionShape& condition_shape() const override { return condition_shape_; }
  int64_t CacheRows(int64_t condition_rows) const override;
  // The prompt's text ids (Condition::prompt_ids) through the text embedding; with `with_null`
  // row 1 is the same ids with the inner ones replaced by pad_id. INVALID_ARGUMENT naming
  // prompt_ids when they do not fit.
  StatusOr<torch::Tensor> EmbedCondition(const Condition& condition,
                                         bool with_null) const override;
  torch::Tensor ConditionPositions(int64_t rows) const override;
  int64_t TokenPosition(int64_t condition_rows, int64_t raster_index) const override;

  // The guidance pair's ids: [2, n] int64, row 0 `ids`, row 1 the unconditional row.
  static torch::Tensor GuidancePair(const std::vector<int64_t>& ids, int64_t pad_id);

 private:
  JanusModel() = default;

  JanusConfig config_;
  int64_t grid_size_ = 0;
  ConditionShape condition_shape_;
  torch::Tensor text_embeddings_;  // [vocab_size, dim]
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_JANUS_MODEL_H_
