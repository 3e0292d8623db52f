#include "engine/model/eagle_head.h"

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<std::shared_ptr<const EagleHead>> EagleHead::LoadDirectory(const std::string& dir,
                                                                    const Transformer& target,
                                                                    const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(config_path));
  JsonFields f(doc, config_path);
  std::shared_ptr<EagleHead> head(new EagleHead());
  BlockShape& s = head->shape_;
  MULO_ASSIGN_OR_RETURN(s.dim, f.Int("dim", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(s.n_head, f.Int("n_head", 1, 1024));
  MULO_ASSIGN_OR_RETURN(int64_t multiple_of, f.Int("multiple_of", 1, 1 << 16, 256));
  MULO_ASSIGN_OR_RETURN(s.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-5));
  if (s.dim != target.config().dim) {
    return f.Error("dim", "must equal the target's dim " + std::to_string(target.config().dim));
  }
  if (s.dim % s.n_head != 0) return f.Error("n_head", "must divide dim");
  s.n_kv_head = s.n_head;
  s.ffn_hidden_dim = LlamaFfnHiddenDim(s.dim, multiple_of, 0.0);
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(head->fc_weight_, ckpt.Get("fc.weight", {s.dim, 2 * s.dim}));
    MULO_ASSIGN_OR_RETURN(head->fc_bias_, ckpt.Get("fc.bias", {s.dim}));
    MULO_ASSIGN_OR_RETURN(head->block_, Block::Load(ckpt, "layers.0.", s));
    return OkStatus();
  }));
  return std::shared_ptr<const EagleHead>(std::move(head));
}

KvCache EagleHead::NewCache(int64_t batch, int64_t capacity) const {
  return KvCache(1, batch, shape_.n_kv_head, shape_.head_dim(), capacity, fc_weight_.options());
}

StatusOr<torch::Tensor> EagleHead::Forward(KvCache& cache, const torch::Tensor& token_embeddings,
                                           const torch::Tensor& features,
                                           const torch::Tensor& mask) const {
  if (!token_embeddings.defined() || !features.defined() || token_embeddings.dim() != 3 ||
      token_embeddings.sizes() != features.sizes() || features.size(2) != shape_.dim ||
      features.size(0) != cache.batch()) {
    return InvalidArgumentError("EagleHead::Forward: expected two [batch, n, dim] inputs");
  }
  return GuardTorch("EagleHead::Forward", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    const int64_t n = features.size(1);
    torch::Tensor attn_mask = mask;
    if (!attn_mask.defined() && n > 1) {
      attn_mask = torch::ones({n, cache.length() + n}, torch::dtype(torch::kBool));
      attn_mask.narrow(1, cache.length(), n).copy_(torch::ones({n, n}, torch::kBool).tril());
      attn_mask = attn_mask.to(fc_weight_.device());
    }
    auto h = torch::linear(torch::cat({token_embeddings, features}, -1).to(fc_weight_.options()),
                           fc_weight_, fc_bias_);
    auto out = block_.Forward(h, torch::Tensor(), Block::PrepareMask(attn_mask, h), &cache, 0);
    cache.Advance(n);
    return out;
  });
}

}  // namespace mulo::engine
