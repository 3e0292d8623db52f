#include "engine/model/janus_model.h"

#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<JanusConfig> LoadJanusConfig(const std::string& path) {
  JanusConfig c;
  MULO_ASSIGN_OR_RETURN(c.language, LoadCausalLmConfig(path, {"janus"}));
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  if (c.language.qkv_bias) return f.Error("qkv_bias", "Janus-Pro's LLaMA has none");
  MULO_ASSIGN_OR_RETURN(c.image_token_count, f.Int("image_token_count", 1, 1 << 24));
  MULO_ASSIGN_OR_RETURN(c.image_embed_dim, f.Int("image_embed_dim", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(c.aligner_depth, f.Int("aligner_depth", 1, 16));
  MULO_ASSIGN_OR_RETURN(c.head_hidden_dim, f.Int("head_hidden_dim", 1, 1 << 20));
  MULO_ASSIGN_OR_RETURN(c.pad_id, f.Int("pad_id", 0, c.language.vocab_size - 1));
  return c;
}

StatusOr<std::shared_ptr<const JanusModel>> JanusModel::LoadDirectory(const std::string& dir,
                                                                        const LoadOptions& options,
                                                                        int64_t grid_size) {
  std::shared_ptr<JanusModel> model(new JanusModel());
  MULO_ASSIGN_OR_RETURN(model->config_, LoadJanusConfig(dir + "/config.json"));
  const JanusConfig& c = model->config_;
  const CausalLmConfig& lm = c.language;
  if (grid_size < 1) {
    return InvalidArgumentError(dir + ": grid_size: Janus-Pro writes a grid its family chooses "
                                      "(24 at 384 px); none was given");
  }
  if (grid_size * grid_size >= lm.max_positions) {
    return InvalidArgumentError("grid_size: " + std::to_string(grid_size) +
                                "^2 image codes leave no room for a prompt in max_positions " +
                                std::to_string(lm.max_positions));
  }
  model->grid_size_ = grid_size;
  model->condition_shape_ =
      ConditionShape{ConditionMode::kPromptIds, lm.max_positions - grid_size * grid_size, 0, 0};
  model->SetGraphOptions(options);
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    at::NoGradGuard no_grad;
    MULO_ASSIGN_OR_RETURN(model->text_embeddings_,
                          ckpt.Get("tok_embeddings.weight", {lm.vocab_size, lm.dim}));
    BlockShape shape{lm.dim, lm.n_head, lm.n_kv_head, lm.ffn_hidden_dim, lm.norm_eps};
    MULO_RETURN_IF_ERROR(model->LoadLayers(ckpt, lm.n_layer, shape));
    MULO_ASSIGN_OR_RETURN(model->norm_, ckpt.Get("norm.weight", {lm.dim}));
    // Every code's input row, once: gen_aligner(gen_embed(k)) for k in [0, codes).
    MULO_ASSIGN_OR_RETURN(torch::Tensor x,
                          ckpt.Get("gen_embed.weight", {c.image_token_count, c.image_embed_dim}));
    int64_t width = c.image_embed_dim;
    for (int64_t i = 0; i < c.aligner_depth; ++i) {
      const std::string p = "gen_aligner.layers." + std::to_string(2 * i) + ".";
      MULO_ASSIGN_OR_RETURN(torch::Tensor w, ckpt.Get(p + "weight", {lm.dim, width}));
      MULO_ASSIGN_OR_RETURN(torch::Tensor b, ckpt.Get(p + "bias", {lm.dim}));
      if (i > 0) x = torch::gelu(x);
      x = torch::linear(x, w, b);
      width = lm.dim;
    }
    model->tok_embeddings_ = x.contiguous();
    const std::string head = "gen_head.";
    MULO_ASSIGN_OR_RETURN(model->head_hidden_, ckpt.Get(head + "output_mlp_projector.weight",
                                                        {c.head_hidden_dim, lm.dim}));
    MULO_ASSIGN_OR_RETURN(model->head_hidden_bias_,
                          ckpt.Get(head + "output_mlp_projector.bias", {c.head_hidden_dim}));
    MULO_ASSIGN_OR_RETURN(model->output_, ckpt.Get(head + "vision_head.weight",
                                                   {c.image_token_count, c.head_hidden_dim}));
    MULO_ASSIGN_OR_RETURN(model->output_bias_,
                          ckpt.Get(head + "vision_head.bias", {c.image_token_count}));
    if (const auto unused = ckpt.UnusedKeys(); !unused.empty()) {
      return InvalidArgumentError(
          weights + ": tensor '" + unused[0] + "' is not part of a janus model" +
          (unused.size() > 1 ? " (and " + std::to_string(unused.size() - 1) + " more)" : ""));
    }
    model->rope_ = RotaryTable(lm, options.device);
    return OkStatus();
  }));
  return std::shared_ptr<const JanusModel>(std::move(model));
}

int64_t JanusModel::CacheRows(int64_t condition_rows) const {
  return condition_rows + num_image_tokens();
}

torch::Tensor JanusModel::GuidancePair(const std::vector<int64_t>& ids, int64_t pad_id) {
  torch::Tensor pair = torch::tensor(ids, torch::kInt64).unsqueeze(0).repeat({2, 1});
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n > 2) pair[1].narrow(0, 1, n - 2).fill_(pad_id);
  return pair;
}

StatusOr<torch::Tensor> JanusModel::EmbedCondition(const Condition& condition,
                                                   bool with_null) const {
  const auto& ids = condition.prompt_ids;
  MULO_RETURN_IF_ERROR(CheckPromptIds(ids, condition_shape_.rows, config_.language.vocab_size,
                                      std::to_string(num_image_tokens()) + " image codes"));
  return GuardTorch("EmbedCondition", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    const torch::Tensor rows = with_null ? GuidancePair(ids, config_.pad_id)
                                         : torch::tensor(ids, torch::kInt64).unsqueeze(0);
    return torch::embedding(text_embeddings_, rows.to(text_embeddings_.device()));
  });
}

torch::Tensor JanusModel::ConditionPositions(int64_t rows) const {
  return torch::arange(rows, torch::kInt64);
}

int64_t JanusModel::TokenPosition(int64_t condition_rows, int64_t raster_index) const {
  return condition_rows + raster_index;
}

}  // namespace mulo::engine
