#include "engine/model/ta_tok_dequantizer.h"

#include <cmath>

#include <torch/nn/functional.h>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

int64_t IntSqrt(int64_t n) {
  int64_t r = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

StatusOr<TaTokConfig> ParseConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  TaTokConfig c;
  constexpr int64_t kBig = int64_t{1} << 20;
  MULO_ASSIGN_OR_RETURN(c.codebook_size, f.Int("codebook_size", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.bottleneck_dim, f.Int("bottleneck_dim", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.l2_normalized, f.Bool("l2_normalized", false));
  MULO_ASSIGN_OR_RETURN(c.in_dim, f.Int("in_dim", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.hidden, f.Int("hidden", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.n_layer, f.Int("n_layer", 0, 1024));
  MULO_ASSIGN_OR_RETURN(c.n_head, f.Int("n_head", 1, 1024));
  MULO_ASSIGN_OR_RETURN(c.intermediate, f.Int("intermediate", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.num_patches, f.Int("num_patches", 1, kBig));
  MULO_ASSIGN_OR_RETURN(c.layer_norm_eps, f.Number("layer_norm_eps", 0.0, 1.0, 1e-6));
  if (c.hidden % c.n_head != 0) {
    return f.Error("n_head", "hidden " + std::to_string(c.hidden) +
                                 " is not divisible by n_head " + std::to_string(c.n_head));
  }
  if (!TaTokDequantizer::IsSquare(c.num_patches)) {
    return f.Error("num_patches", std::to_string(c.num_patches) + " is not a square");
  }
  return c;
}

}  // namespace

bool TaTokDequantizer::IsSquare(int64_t n) {
  if (n < 1) return false;
  const int64_t r = IntSqrt(n);
  return r * r == n;
}

StatusOr<std::shared_ptr<const TaTokDequantizer>> TaTokDequantizer::LoadDirectory(
    const std::string& dir, const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(TaTokConfig config, ParseConfig(dir + "/config.json"));
  std::shared_ptr<TaTokDequantizer> m(new TaTokDequantizer(config));
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir + "/model.safetensors", options));
  MULO_RETURN_IF_ERROR(m->LoadWeights(ckpt));
  return std::shared_ptr<const TaTokDequantizer>(std::move(m));
}

Status TaTokDequantizer::LoadWeights(Checkpoint& ckpt) {
  const auto& c = config_;
  const int64_t h = c.hidden, bd = c.bottleneck_dim;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, Linear* l) -> Status {
    MULO_ASSIGN_OR_RETURN(l->weight, ckpt.Get(name + ".weight", {out, in}));
    MULO_ASSIGN_OR_RETURN(l->bias, ckpt.Get(name + ".bias", {out}));
    return OkStatus();
  };
  auto norm = [&](const std::string& name, LayerNorm* n) -> Status {
    MULO_ASSIGN_OR_RETURN(n->weight, ckpt.Get(name + ".weight", {h}));
    MULO_ASSIGN_OR_RETURN(n->bias, ckpt.Get(name + ".bias", {h}));
    return OkStatus();
  };
  const std::string reg = "bottleneck.regularizer.", vm = "decoder.vision_model.";
  MULO_ASSIGN_OR_RETURN(embedding_, ckpt.Get(reg + "embedding.weight", {c.codebook_size, bd}));
  MULO_RETURN_IF_ERROR(linear(reg + "embedding_proj", bd, bd, &embedding_proj_));
  MULO_RETURN_IF_ERROR(linear("bottleneck.out_linear", bd, c.in_dim, &out_linear_));
  MULO_RETURN_IF_ERROR(linear(vm + "embeddings.patch_embedding", c.in_dim, h, &patch_embedding_));
  MULO_ASSIGN_OR_RETURN(position_embedding_, ckpt.Get(vm + "embeddings.position_embedding.weight",
                                                      {c.num_patches, h}));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = vm + "encoder.layers." + std::to_string(i) + ".";
    Layer l;
    MULO_RETURN_IF_ERROR(norm(p + "layer_norm1", &l.norm1));
    MULO_RETURN_IF_ERROR(norm(p + "layer_norm2", &l.norm2));
    MULO_RETURN_IF_ERROR(linear(p + "self_attn.q_proj", h, h, &l.q));
    MULO_RETURN_IF_ERROR(linear(p + "self_attn.k_proj", h, h, &l.k));
    MULO_RETURN_IF_ERROR(linear(p + "self_attn.v_proj", h, h, &l.v));
    MULO_RETURN_IF_ERROR(linear(p + "self_attn.out_proj", h, h, &l.out));
    MULO_RETURN_IF_ERROR(linear(p + "mlp.fc1", h, c.intermediate, &l.fc1));
    MULO_RETURN_IF_ERROR(linear(p + "mlp.fc2", c.intermediate, h, &l.fc2));
    layers_.push_back(std::move(l));
  }
  MULO_RETURN_IF_ERROR(norm(vm + "post_layernorm", &post_layernorm_));
  MULO_RETURN_IF_ERROR(linear("decode_task_layer.0", h, h, &task_in_));
  MULO_RETURN_IF_ERROR(linear("decode_task_layer.2", h, h, &task_out_));
  return OkStatus();
}

torch::Tensor TaTokDequantizer::Norm(const torch::Tensor& x, const LayerNorm& n) const {
  return torch::layer_norm(x, {config_.hidden}, n.weight, n.bias, config_.layer_norm_eps);
}

torch::Tensor TaTokDequantizer::Attention(const torch::Tensor& x, const Layer& l) const {
  const int64_t n = x.size(0), heads = config_.n_head, hd = config_.hidden / heads;
  auto split = [&](const torch::Tensor& t) { return t.view({n, heads, hd}).transpose(0, 1); };
  auto q = split(l.q(x)), k = split(l.k(x)), v = split(l.v(x));
  // Every grid position sees every other: upstream passes an all-ones attention mask.
  auto weights = torch::softmax(
      (torch::matmul(q, k.transpose(-1, -2)) * std::pow(static_cast<double>(hd), -0.5))
          .to(torch::kFloat32),
      -1);
  auto out = torch::matmul(weights.to(v.scalar_type()), v).transpose(0, 1).reshape({n, -1});
  return l.out(out);
}

torch::Tensor TaTokDequantizer::Positions(int64_t p) const {
  const int64_t side = IntSqrt(config_.num_patches), h = config_.hidden;
  // [side * side, h] -> [1, h, side, side]; resized in float32 like upstream on the CPU.
  auto table = position_embedding_.to(torch::kFloat32).view({side, side, h}).permute({2, 0, 1});
  auto resized = torch::nn::functional::interpolate(
      table.unsqueeze(0), torch::nn::functional::InterpolateFuncOptions()
                              .size(std::vector<int64_t>{p, p})
                              .mode(torch::kBilinear)
                              .align_corners(false)
                              .antialias(true));
  return resized.view({h, p * p}).transpose(0, 1).to(position_embedding_.scalar_type());
}

Status TaTokDequantizer::CheckIds(const std::vector<int64_t>& ids) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (!IsSquare(n)) {
    return InvalidArgumentError("condition_tokens: " + std::to_string(n) +
                                " ids do not form a square grid");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= config_.codebook_size) {
      return InvalidArgumentError("condition_tokens: id " + std::to_string(ids[i]) + " at " +
                                  std::to_string(i) + " is outside [0, " +
                                  std::to_string(config_.codebook_size) + ")");
    }
  }
  return OkStatus();
}

StatusOr<torch::Tensor> TaTokDequantizer::Decode(const std::vector<int64_t>& ids) const {
  const auto& c = config_;
  const int64_t n = static_cast<int64_t>(ids.size());
  MULO_RETURN_IF_ERROR(CheckIds(ids));
  return GuardTorch("TaTokDequantizer::Decode", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    auto index = torch::tensor(ids, torch::kInt64).to(embedding_.device());
    // SimVQ: the codebook is embedding_proj(embedding); only the rows asked for are projected
    // (the same rows the full projection would give).
    auto z = embedding_proj_(embedding_.index_select(0, index));
    if (c.l2_normalized) {
      z = torch::nn::functional::normalize(z, torch::nn::functional::NormalizeFuncOptions()
                                                  .p(2)
                                                  .dim(-1));
    }
    auto x = patch_embedding_(out_linear_(z)) + Positions(IntSqrt(n));
    for (const Layer& l : layers_) {
      x = x + Attention(Norm(x, l.norm1), l);
      x = x + l.fc2(torch::gelu(l.fc1(Norm(x, l.norm2)), "tanh"));
    }
    x = Norm(x, post_layernorm_);
    return task_out_(torch::tanh(task_in_(x))).to(torch::kFloat32);
  });
}

}  // namespace mulo::engine
