#include "engine/model/causal_lm.h"

#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<CausalLmConfig> LoadCausalLmConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  CausalLmConfig c;
  MULO_ASSIGN_OR_RETURN(c.architecture, f.Enum("architecture", {"qwen2", "llama"}));
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
  return c;
}

StatusOr<std::shared_ptr<const CausalLm>> CausalLm::LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options) {
  std::shared_ptr<CausalLm> model(new CausalLm());
  MULO_ASSIGN_OR_RETURN(model->config_, LoadCausalLmConfig(dir + "/config.json"));
  const CausalLmConfig& c = model->config_;
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(model->tok_embeddings_,
                          ckpt.Get("tok_embeddings.weight", {c.vocab_size, c.dim}));
    BlockShape shape{c.dim, c.n_head, c.n_kv_head, c.ffn_hidden_dim, c.norm_eps};
    shape.qkv_bias = c.qkv_bias;
    for (int64_t i = 0; i < c.n_layer; ++i) {
      MULO_ASSIGN_OR_RETURN(Block block,
                            Block::Load(ckpt, "layers." + std::to_string(i) + ".", shape));
      model->layers_.push_back(std::move(block));
    }
    MULO_ASSIGN_OR_RETURN(model->norm_, ckpt.Get("norm.weight", {c.dim}));
    if (c.tie_word_embeddings) {
      model->output_ = model->tok_embeddings_;
    } else {
      MULO_ASSIGN_OR_RETURN(model->output_, ckpt.Get("output.weight", {c.vocab_size, c.dim}));
    }
    if (const auto unused = ckpt.UnusedKeys(); !unused.empty()) {
      return InvalidArgumentError(weights + ": tensor '" + unused[0] +
                                  "' is not part of a " + c.architecture + " model" +
                                  (unused.size() > 1 ? " (and " +
                                       std::to_string(unused.size() - 1) + " more)" : ""));
    }
    // Rotary table, as upstream computes it in float32: frequency i is theta^(-2i/d).
    torch::NoGradGuard no_grad;
    const int64_t hd = c.head_dim();
    const auto f32 = torch::dtype(torch::kFloat32);
    const torch::Tensor inv_freq =
        1.0 / torch::pow(c.rope_theta, torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) /
                                           static_cast<double>(hd));
    const torch::Tensor angles =
        torch::arange(c.max_positions, f32).unsqueeze(1) * inv_freq.unsqueeze(0);
    model->rope_ = torch::stack({angles.cos(), angles.sin()}, -1).to(options.device);
    return OkStatus();
  }));
  return std::shared_ptr<const CausalLm>(std::move(model));
}

KvCache CausalLm::NewCache(int64_t batch, int64_t capacity) const {
  return KvCache(config_.n_layer, batch, config_.n_kv_head, config_.head_dim(), capacity,
                 tok_embeddings_.options());
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
                                " exceed max_positions " +
                                std::to_string(config_.max_positions));
  }
  if (tokens.min().item<int64_t>() < 0 || tokens.max().item<int64_t>() >= config_.vocab_size) {
    return InvalidArgumentError("tokens: ids must be in [0, " +
                                std::to_string(config_.vocab_size) + ")");
  }
  return GuardTorch("CausalLm::Forward", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::embedding(tok_embeddings_, tokens.to(tok_embeddings_.device()));
    torch::Tensor mask;
    if (n > 1) {  // causal among the new rows; every cached row is visible
      const auto device = torch::TensorOptions().device(x.device());
      const torch::Tensor keys = torch::arange(start + n, device.dtype(torch::kInt64));
      const torch::Tensor queries = torch::arange(start, start + n, device.dtype(torch::kInt64));
      mask = Block::PrepareMask(keys.unsqueeze(0) <= queries.unsqueeze(1), x);
    }
    const torch::Tensor rope = rope_.narrow(0, start, n);
    for (int64_t i = 0; i < config_.n_layer; ++i) {
      x = layers_[i].Forward(x, rope, mask, &cache, i);
    }
    cache.Advance(n);
    torch::Tensor h = RmsNorm(last_only ? x.narrow(1, n - 1, 1) : x, norm_, config_.norm_eps);
    return torch::linear(h, output_).to(torch::kFloat32);
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

}  // namespace mulo::engine
