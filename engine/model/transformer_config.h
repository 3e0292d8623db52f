// Configuration of a LlamaGen GPT / Tar AR-DTok transformer (config.json beside the weights).
#ifndef MULO_ENGINE_MODEL_TRANSFORMER_CONFIG_H_
#define MULO_ENGINE_MODEL_TRANSFORMER_CONFIG_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/status.h"
#include "engine/model/condition.h"

namespace mulo::engine {

enum class PositionMode {
  kAbsPe,   // Tar: learned absolute position table `abs_pe` added to the input embeddings
  kRope2d,  // LlamaGen: 2D rotary embedding on q/k (rows then columns), zeros at conditions
};

struct TransformerConfig {
  int64_t dim = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // grouped-query attention when < n_head
  int64_t vocab_size = 0;
  int64_t grid_size = 0;      // image tokens form a grid_size x grid_size raster
  int64_t cls_token_num = 0;  // number of condition positions before the image tokens
  PositionMode position_mode = PositionMode::kAbsPe;
  ConditionMode condition_mode = ConditionMode::kClipCond;
  int64_t cond_dim = 0;     // clip_cond / caption feature width
  int64_t num_classes = 0;  // class_label
  int64_t ffn_hidden_dim = 0;
  double norm_eps = 1e-5;
  double rope_base = 10000.0;

  int64_t head_dim() const { return dim / n_head; }
  int64_t num_image_tokens() const { return grid_size * grid_size; }
  // Longest sequence the model ever sees: condition positions plus all but the last token.
  int64_t max_positions() const { return cls_token_num + num_image_tokens() - 1; }
};

// Validates and fills a config; `source` names the document in error messages.
StatusOr<TransformerConfig> ParseTransformerConfig(const nlohmann::json& doc,
                                                   const std::string& source);
StatusOr<TransformerConfig> LoadTransformerConfig(const std::string& path);

// LlamaGen's FFN width rule: find_multiple(int(mult * int(2 * 4 * dim / 3)), multiple_of).
int64_t LlamaFfnHiddenDim(int64_t dim, int64_t multiple_of, double ffn_dim_multiplier);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TRANSFORMER_CONFIG_H_
