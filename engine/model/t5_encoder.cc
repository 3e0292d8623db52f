#include "engine/model/t5_encoder.h"

#include <cmath>
#include <limits>
#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

StatusOr<T5EncoderConfig> ParseConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  MULO_ASSIGN_OR_RETURN(std::string architecture, f.Enum("architecture", {"t5_encoder"}));
  T5EncoderConfig c;
  MULO_ASSIGN_OR_RETURN(c.d_model, f.Int("d_model", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(c.d_kv, f.Int("d_kv", 1, 1 << 12));
  MULO_ASSIGN_OR_RETURN(c.d_ff, f.Int("d_ff", 1, 1 << 20));
  MULO_ASSIGN_OR_RETURN(c.num_layers, f.Int("num_layers", 1, 256));
  MULO_ASSIGN_OR_RETURN(c.num_heads, f.Int("num_heads", 1, 256));
  MULO_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 1, 1 << 24));
  MULO_ASSIGN_OR_RETURN(c.num_buckets, f.Int("num_buckets", 4, 1 << 12, 32));
  MULO_ASSIGN_OR_RETURN(c.max_distance, f.Int("max_distance", 2, 1 << 20, 128));
  MULO_ASSIGN_OR_RETURN(c.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-6));
  if (c.max_distance <= c.num_buckets / 4) {
    return f.Error("max_distance", "must exceed num_buckets / 4 (the exact buckets)");
  }
  return c;
}

// T5's layer norm: x * rsqrt(mean(x^2) + eps) with the variance in float32, times the weight.
torch::Tensor T5Norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::Tensor variance = x.to(torch::kFloat32).pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x * torch::rsqrt(variance + eps)).to(weight.scalar_type());
}

}  // namespace

torch::Tensor T5Encoder::RelativeBuckets(const torch::Tensor& relative, int64_t num_buckets,
                                         int64_t max_distance) {
  const int64_t half = num_buckets / 2;  // bidirectional: keys after the query use the upper half
  torch::Tensor buckets = (relative > 0).to(torch::kInt64) * half;
  const torch::Tensor distance = relative.abs();
  const int64_t max_exact = half / 2;
  torch::Tensor large =
      max_exact + (torch::log(distance.to(torch::kFloat32) / static_cast<double>(max_exact)) /
                   std::log(static_cast<double>(max_distance) / max_exact) *
                   static_cast<double>(half - max_exact))
                      .to(torch::kInt64);
  large = torch::clamp_max(large, half - 1);
  return buckets + torch::where(distance < max_exact, distance, large);
}

StatusOr<std::shared_ptr<const T5Encoder>> T5Encoder::LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options) {
  std::shared_ptr<T5Encoder> model(new T5Encoder());
  MULO_ASSIGN_OR_RETURN(model->config_, ParseConfig(dir + "/config.json"));
  const T5EncoderConfig& c = model->config_;
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    const int64_t d = c.d_model, inner = c.num_heads * c.d_kv, ff = c.d_ff;
    MULO_ASSIGN_OR_RETURN(model->embed_tokens_,
                          ckpt.Get("embed_tokens.weight", {c.vocab_size, d}));
    MULO_ASSIGN_OR_RETURN(
        model->relative_bias_,
        ckpt.Get("block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                 {c.num_buckets, c.num_heads}));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "block." + std::to_string(i) + ".layer.";
      Block b;
      MULO_ASSIGN_OR_RETURN(b.q, ckpt.Get(p + "0.SelfAttention.q.weight", {inner, d}));
      MULO_ASSIGN_OR_RETURN(b.k, ckpt.Get(p + "0.SelfAttention.k.weight", {inner, d}));
      MULO_ASSIGN_OR_RETURN(b.v, ckpt.Get(p + "0.SelfAttention.v.weight", {inner, d}));
      MULO_ASSIGN_OR_RETURN(b.o, ckpt.Get(p + "0.SelfAttention.o.weight", {d, inner}));
      MULO_ASSIGN_OR_RETURN(b.attention_norm, ckpt.Get(p + "0.layer_norm.weight", {d}));
      MULO_ASSIGN_OR_RETURN(b.wi_0, ckpt.Get(p + "1.DenseReluDense.wi_0.weight", {ff, d}));
      MULO_ASSIGN_OR_RETURN(b.wi_1, ckpt.Get(p + "1.DenseReluDense.wi_1.weight", {ff, d}));
      MULO_ASSIGN_OR_RETURN(b.wo, ckpt.Get(p + "1.DenseReluDense.wo.weight", {d, ff}));
      MULO_ASSIGN_OR_RETURN(b.ffn_norm, ckpt.Get(p + "1.layer_norm.weight", {d}));
      model->blocks_.push_back(std::move(b));
    }
    MULO_ASSIGN_OR_RETURN(model->final_norm_, ckpt.Get("final_layer_norm.weight", {d}));
    if (const auto unused = ckpt.UnusedKeys(); !unused.empty()) {
      return InvalidArgumentError(weights + ": tensor '" + unused[0] +
                                  "' is not part of a T5 encoder");
    }
    return OkStatus();
  }));
  return std::shared_ptr<const T5Encoder>(std::move(model));
}

StatusOr<torch::Tensor> T5Encoder::Encode(const torch::Tensor& ids,
                                          const torch::Tensor& mask) const {
  if (ids.dim() != 2 || ids.size(1) < 1 || ids.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("ids: expected int64 [batch, n >= 1]");
  }
  if (!mask.defined() || mask.sizes() != ids.sizes()) {
    return InvalidArgumentError("mask: expected the shape of ids");
  }
  if (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= config_.vocab_size) {
    return InvalidArgumentError("ids: must be in [0, " + std::to_string(config_.vocab_size) +
                                ")");
  }
  return GuardTorch("T5Encoder::Encode", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    const auto device = embed_tokens_.device();
    const int64_t batch = ids.size(0), n = ids.size(1), heads = config_.num_heads;
    torch::Tensor x = torch::embedding(embed_tokens_, ids.to(device));
    // Position bias [1, heads, n, n] plus the padding mask, once for every block.
    const torch::Tensor position = torch::arange(n, torch::dtype(torch::kInt64).device(device));
    const torch::Tensor relative = position.unsqueeze(0) - position.unsqueeze(1);  // key - query
    torch::Tensor bias = torch::embedding(
        relative_bias_,
        RelativeBuckets(relative, config_.num_buckets, config_.max_distance));  // [n, n, heads]
    bias = bias.permute({2, 0, 1}).unsqueeze(0).to(x.scalar_type());
    const double lowest = std::numeric_limits<float>::lowest();
    bias = bias + (1.0 - (mask.to(device) != 0).to(x.scalar_type()))
                          .view({batch, 1, 1, n}) * lowest;
    auto split = [&](const torch::Tensor& t) {
      return t.view({batch, n, heads, config_.d_kv}).transpose(1, 2);
    };
    for (const Block& b : blocks_) {
      const torch::Tensor h = T5Norm(x, b.attention_norm, config_.norm_eps);
      const torch::Tensor q = split(torch::linear(h, b.q)), k = split(torch::linear(h, b.k)),
                          v = split(torch::linear(h, b.v));
      const torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) + bias;  // no scaling
      const torch::Tensor attn =
          torch::softmax(scores.to(torch::kFloat32), -1).to(scores.scalar_type());
      x = x + torch::linear(torch::matmul(attn, v).transpose(1, 2).reshape({batch, n, -1}), b.o);
      const torch::Tensor f = T5Norm(x, b.ffn_norm, config_.norm_eps);
      const torch::Tensor gate = torch::gelu(torch::linear(f, b.wi_0), "tanh");
      x = x + torch::linear(gate * torch::linear(f, b.wi_1), b.wo);
    }
    return T5Norm(x, final_norm_, config_.norm_eps).to(torch::kFloat32);
  });
}

}  // namespace mulo::engine
