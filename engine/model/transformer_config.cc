#include "engine/model/transformer_config.h"

#include "engine/model/json_fields.h"

namespace mulo::engine {

int64_t LlamaFfnHiddenDim(int64_t dim, int64_t multiple_of, double ffn_dim_multiplier) {
  int64_t hidden = static_cast<int64_t>(2.0 * static_cast<double>(4 * dim) / 3.0);
  if (ffn_dim_multiplier > 0) {
    hidden = static_cast<int64_t>(ffn_dim_multiplier * static_cast<double>(hidden));
  }
  if (hidden % multiple_of != 0) hidden += multiple_of - hidden % multiple_of;
  return hidden;
}

StatusOr<TransformerConfig> ParseTransformerConfig(const nlohmann::json& doc,
                                                   const std::string& source) {
  JsonFields f(doc, source);
  TransformerConfig c;
  constexpr int64_t kBig = int64_t{1} << 20;
  MULO_ASSIGN_OR_RETURN(c.dim, f.Int("dim", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.n_layer, f.Int("n_layer", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.n_head, f.Int("n_head", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.n_kv_head, f.Int("n_kv_head", 1, 1024, c.n_head));
  MULO_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 2, kBig));
  MULO_ASSIGN_OR_RETURN(c.grid_size, f.Int("grid_size", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.cls_token_num, f.Int("cls_token_num", 1, 65536));
  MULO_ASSIGN_OR_RETURN(std::string position, f.Enum("position_mode", {"abs_pe", "rope_2d"}));
  c.position_mode = position == "abs_pe" ? PositionMode::kAbsPe : PositionMode::kRope2d;
  MULO_ASSIGN_OR_RETURN(std::string condition,
                        f.Enum("condition_mode", {"clip_cond", "class_label", "caption"}));
  if (condition == "clip_cond") {
    c.condition_mode = ConditionMode::kClipCond;
  } else if (condition == "class_label") {
    c.condition_mode = ConditionMode::kClassLabel;
  } else {
    c.condition_mode = ConditionMode::kCaption;
  }
  if (c.condition_mode == ConditionMode::kClassLabel) {
    MULO_ASSIGN_OR_RETURN(c.num_classes, f.Int("num_classes", 1, kBig));
    if (c.cls_token_num != 1) {
      return f.Error("cls_token_num", "class_label conditioning uses exactly 1 position");
    }
  } else {
    MULO_ASSIGN_OR_RETURN(c.cond_dim, f.Int("cond_dim", 1, kBig));
  }
  MULO_ASSIGN_OR_RETURN(int64_t multiple_of, f.Int("multiple_of", 1, kBig, 256));
  MULO_ASSIGN_OR_RETURN(double multiplier, f.Number("ffn_dim_multiplier", 0.0, 64.0, 0.0));
  MULO_ASSIGN_OR_RETURN(c.ffn_hidden_dim,
                        f.Int("ffn_hidden_dim", 0, kBig * 64, 0));
  if (c.ffn_hidden_dim == 0) c.ffn_hidden_dim = LlamaFfnHiddenDim(c.dim, multiple_of, multiplier);
  MULO_ASSIGN_OR_RETURN(c.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-5));
  MULO_ASSIGN_OR_RETURN(c.rope_base, f.Number("rope_base", 1.0, 1e12, 10000.0));

  if (c.dim % c.n_head != 0) {
    return f.Error("n_head", "dim " + std::to_string(c.dim) + " is not divisible by n_head " +
                                 std::to_string(c.n_head));
  }
  if (c.n_head % c.n_kv_head != 0) {
    return f.Error("n_kv_head", "n_head " + std::to_string(c.n_head) +
                                    " is not a multiple of n_kv_head " +
                                    std::to_string(c.n_kv_head));
  }
  if (c.position_mode == PositionMode::kRope2d && c.head_dim() % 4 != 0) {
    return f.Error("n_head", "rope_2d needs head_dim (dim / n_head = " +
                                 std::to_string(c.head_dim()) + ") divisible by 4");
  }
  return c;
}

StatusOr<TransformerConfig> LoadTransformerConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  return ParseTransformerConfig(doc, path);
}

}  // namespace mulo::engine
