#include "engine/model/causal_lm.h"

#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<CausalLmConfig> LoadCausalLmConfig(const std::string& path,
                                            const std::vector<std::string>& architectures) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  CausalLmConfig c;
  MULO_ASSIGN_OR_RETURN(c.architecture, f.Enum("architecture", architectures));
  MULO_ASSIGN_OR_RETURN(c.dim, f.Int("dim", 2, 1 << 16));
  MULO_ASSIGN_OR_RETURN(c.n_layer, f.Int("n_layer", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.n_head, f.Int("n_head", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.n_kv_head, f.Int("n_kv_head", 1, 1024, c.n_head));
  MULO_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 1, 1 << 24));
  MULO_ASSIGN_OR_RETURN(c.ffn_hidden_dim, f.Int("ffn_hidden_dim", 1, 1 << 20));
  MULO_ASSIGN_OR_RETURN(c.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-6));
  MULO_ASSIGN_OR_RETURN(c.rope_theta, f.Number("rope_theta", 1.0, 1e12, 10000.0));
  MULO_ASSIGN_OR_RETURN(c.qkv_bias, f.Bool("qkv_bias", false));
  MULO_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  MULO_ASSIGN_OR_RETURN(c.max_positions, f.Int("max_positions", 1, 1 << 24));
  if (c.dim % c.n_head != 0 || c.head_dim() % 2 != 0) {
    return f.Error("n_head", "must divide dim into heads of an even width");
  }
  if (c.n_head % c.n_kv_head != 0) return f.Error("n_kv_head", "must divide n_head");
  MULO_ASSIGN_OR_RETURN(c.image_token_offset, f.Int("image_token_offset", 0, c.vocab_size - 1, 0));
  MULO_ASSIGN_OR_RETURN(c.image_token_count,
                        f.Int("image_token_count", 0, c.vocab_size - c.image_token_offset, 0));
  return c;
}

StatusOr<std::shared_ptr<const CausalLm>> CausalLm::LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options,
                                                                  int64_t grid_size) {
  std::shared_ptr<CausalLm> model(new CausalLm());
  MULO_ASSIGN_OR_RETURN(model->config_, LoadCausalLmConfig(dir + "/config.json"));
  const CausalLmConfig& c = model->config_;
  if (grid_size < 0) return InvalidArgumentError("grid_size: must be >= 0");
  if (grid_size > 0) {
    if (c.image_token_count == 0) {
      return InvalidArgumentError(dir +
                                  "/config.json: image_token_count: the model has no image "
                                  "tokens, so it cannot write an image");
    }
    if (grid_size * grid_size >= c.max_positions) {
      return InvalidArgumentError("grid_size: " + std::to_string(grid_size) +
                                  "^2 image tokens "
                                  "leave no room for a prompt in max_positions " +
                                  std::to_string(c.max_positions));
    }
  }
  model->grid_size_ = grid_size;
  model->condition_shape_ =
      ConditionShape{ConditionMode::kPromptIds, c.max_positions - grid_size * grid_size, 0, 0};
  model->SetGraphOptions(options);
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(model->text_embeddings_,
                          ckpt.Get("tok_embeddings.weight", {c.vocab_size, c.dim}));
    BlockShape shape{c.dim, c.n_head, c.n_kv_head, c.ffn_hidden_dim, c.norm_eps};
    shape.qkv_bias = c.qkv_bias;
    MULO_RETURN_IF_ERROR(model->LoadLayers(ckpt, c.n_layer, shape));
    MULO_ASSIGN_OR_RETURN(model->norm_, ckpt.Get("norm.weight", {c.dim}));
    if (c.tie_word_embeddings) {
      model->text_output_ = model->text_embeddings_;
    } else {
      MULO_ASSIGN_OR_RETURN(model->text_output_, ckpt.Get("output.weight", {c.vocab_size, c.dim}));
    }
    if (const auto unused = ckpt.UnusedKeys(); !unused.empty()) {
      return InvalidArgumentError(
          weights + ": tensor '" + unused[0] + "' is not part of a " + c.architecture + " model" +
          (unused.size() > 1 ? " (and " + std::to_string(unused.size() - 1) + " more)" : ""));
    }
    // The image tokens' rows: views of the text tables (no copy). A text-only model keeps the
    // whole vocabulary there.
    const int64_t first = c.image_token_count > 0 ? c.image_token_offset : 0;
    const int64_t count = c.image_token_count > 0 ? c.image_token_count : c.vocab_size;
    model->tok_embeddings_ = model->text_embeddings_.narrow(0, first, count);
    model->output_ = model->text_output_.narrow(0, first, count);
    model->rope_ = RotaryTable(c, options.device);
    return OkStatus();
  }));
  return std::shared_ptr<const CausalLm>(std::move(model));
}

Status CheckPromptIds(const std::vector<int64_t>& ids, int64_t rows, int64_t vocab_size,
                      const std::string& image) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 1 || n > rows) {
    return InvalidArgumentError("prompt_ids: " + std::to_string(n) +
                                " text tokens, the model takes 1.." + std::to_string(rows) +
                                " before its " + image);
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgumentError("prompt_ids: " + std::to_string(id) + " is outside [0, " +
                                  std::to_string(vocab_size) + ")");
    }
  }
  return OkStatus();
}

torch::Tensor RotaryTable(const CausalLmConfig& c, const torch::Device& device) {
  at::NoGradGuard no_grad;
  const int64_t hd = c.head_dim();
  const auto f32 = torch::dtype(torch::kFloat32);
  const torch::Tensor inv_freq =
      1.0 / torch::pow(c.rope_theta, torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) /
                                         static_cast<double>(hd));
  const torch::Tensor angles =
      torch::arange(c.max_positions, f32).unsqueeze(1) * inv_freq.unsqueeze(0);
  return torch::stack({angles.cos(), angles.sin()}, -1).to(device);
}

StatusOr<torch::Tensor> CausalLm::Forward(KvCache& cache, const torch::Tensor& tokens,
                                          bool last_only) const {
  if (tokens.dim() != 2 || tokens.size(0) != cache.batch() || tokens.size(1) < 1 ||
      tokens.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("tokens: expected int64 [" + std::to_string(cache.batch()) +
                                ", n >= 1]");
  }
  const int64_t start = cache.length(), n = tokens.size(1);
  if (start + n > config_.max_positions) {
    return InvalidArgumentError("tokens: positions up to " + std::to_string(start + n - 1) +
                                " exceed max_positions " + std::to_string(config_.max_positions));
  }
  if (tokens.min().item<int64_t>() < 0 || tokens.max().item<int64_t>() >= config_.vocab_size) {
    return InvalidArgumentError("tokens: ids must be in [0, " + std::to_string(config_.vocab_size) +
                                ")");
  }
  return GuardTorch("CausalLm::Forward", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    torch::Tensor x = torch::embedding(text_embeddings_, tokens.to(text_embeddings_.device()));
    const torch::Tensor positions =
        torch::arange(start, start + n, torch::dtype(torch::kInt64).device(x.device()));
    const torch::Tensor rope = ApplyPositions(&x, positions);
    x = RunBlocks(cache, x, rope, CausalMask(cache, n, x), torch::Tensor(), 0);
    cache.Advance(n);
    torch::Tensor h = RmsNorm(last_only ? x.narrow(1, n - 1, 1) : x, norm_, config_.norm_eps);
    return torch::linear(h, text_output_).to(torch::kFloat32);
  });
}

StatusOr<std::vector<int64_t>> CausalLm::GreedyContinuation(const std::vector<int64_t>& prompt,
                                                            int64_t steps) const {
  if (prompt.empty()) return InvalidArgumentError("prompt: at least one token is needed");
  KvCache cache = NewCache(1, static_cast<int64_t>(prompt.size()) + steps);
  torch::Tensor next = torch::tensor(prompt, torch::kInt64).unsqueeze(0);
  std::vector<int64_t> out;
  for (int64_t s = 0; s < steps; ++s) {
    MULO_ASSIGN_OR_RETURN(torch::Tensor logits, Forward(cache, next, /*last_only=*/true));
    const int64_t token = logits.view({-1}).argmax().item<int64_t>();
    out.push_back(token);
    next = torch::tensor({token}, torch::kInt64).unsqueeze(0);
  }
  return out;
}

int64_t CausalLm::CacheRows(int64_t condition_rows) const {
  return condition_rows + num_image_tokens();
}

StatusOr<torch::Tensor> CausalLm::EmbedCondition(const Condition& condition, bool with_null) const {
  if (grid_size_ == 0) {
    return FailedPreconditionError("condition: this " + config_.architecture +
                                   " model was loaded for text only (no grid)");
  }
  if (with_null) {
    return InvalidArgumentError("cfg_scale: a " + config_.architecture +
                                " image-token model samples without classifier-free guidance");
  }
  const auto& ids = condition.prompt_ids;
  MULO_RETURN_IF_ERROR(CheckPromptIds(ids, condition_shape_.rows, config_.vocab_size,
                                      std::to_string(num_image_tokens()) + " image tokens"));
  return GuardTorch("EmbedCondition", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    const auto index = torch::tensor(ids, torch::kInt64).to(text_embeddings_.device());
    return text_embeddings_.index_select(0, index).unsqueeze(0);
  });
}

torch::Tensor CausalLm::ConditionPositions(int64_t rows) const {
  return torch::arange(rows, torch::kInt64);
}

int64_t CausalLm::TokenPosition(int64_t condition_rows, int64_t raster_index) const {
  return condition_rows + raster_index;
}

}  // namespace mulo::engine
