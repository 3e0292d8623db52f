#include "engine/model/transformer.h"

#include <cmath>

#include "engine/core/torch_guard.h"

namespace mulo::engine {
namespace {

std::string TensorShape(const torch::Tensor& t) {
  return t.defined() ? ShapeToString(t.sizes().vec()) : "undefined";
}

}  // namespace

torch::Tensor Rope2dTable(int64_t grid, int64_t head_dim, double base, int64_t cls_token_num) {
  const int64_t half = head_dim / 2;
  auto exponents =
      torch::arange(0, half, 2, torch::kFloat32).slice(0, 0, half / 2) / static_cast<double>(half);
  auto freqs = 1.0 / torch::pow(torch::full({}, base, torch::kFloat32), exponents);
  auto t = torch::arange(grid, torch::kFloat32);
  auto f = torch::outer(t, freqs);  // [grid, hd/4]
  auto rows = f.unsqueeze(1).expand({grid, grid, f.size(1)});
  auto cols = f.unsqueeze(0).expand({grid, grid, f.size(1)});
  auto grid_f = torch::cat({rows, cols}, -1);  // [grid, grid, hd/2]
  auto cache = torch::stack({torch::cos(grid_f), torch::sin(grid_f)}, -1).flatten(0, 1);
  return torch::cat({torch::zeros({cls_token_num, half, 2}), cache});
}

StatusOr<std::shared_ptr<const Transformer>> Transformer::Load(const TransformerConfig& config,
                                                               const std::string& weights_path,
                                                               const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(weights_path, options));
  std::shared_ptr<Transformer> model(new Transformer(config));
  model->SetGraphOptions(options);
  MULO_RETURN_IF_ERROR(GuardTorch(weights_path, [&] { return model->LoadWeights(checkpoint); }));
  return std::shared_ptr<const Transformer>(std::move(model));
}

StatusOr<std::shared_ptr<const Transformer>> Transformer::LoadDirectory(
    const std::string& dir, const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(TransformerConfig config, LoadTransformerConfig(dir + "/config.json"));
  return Load(config, dir + "/model.safetensors", options);
}

Status Transformer::LoadWeights(Checkpoint& ckpt) {
  const auto& c = config_;
  const int64_t d = c.dim, hd = c.head_dim();
  MULO_ASSIGN_OR_RETURN(tok_embeddings_, ckpt.Get("tok_embeddings.weight", {c.vocab_size, d}));
  if (c.position_mode == PositionMode::kAbsPe) {
    MULO_ASSIGN_OR_RETURN(abs_pe_, ckpt.Get("abs_pe", {1, c.max_positions(), d}));
    abs_pe_ = abs_pe_.squeeze(0);
  } else {
    rope_ = Rope2dTable(c.grid_size, hd, c.rope_base, c.cls_token_num).to(tok_embeddings_.device());
  }
  switch (c.condition_mode) {
    case ConditionMode::kClipCond: {
      MULO_ASSIGN_OR_RETURN(clip_proj_w_, ckpt.Get("clip_proj.weight", {d, c.cond_dim}));
      MULO_ASSIGN_OR_RETURN(clip_proj_b_, ckpt.Get("clip_proj.bias", {d}));
      break;
    }
    case ConditionMode::kClassLabel: {
      MULO_ASSIGN_OR_RETURN(
          class_table_, ckpt.Get("cls_embedding.embedding_table.weight", {c.num_classes + 1, d}));
      break;
    }
    case ConditionMode::kCaption: {
      MULO_ASSIGN_OR_RETURN(cap_fc1_w_,
                            ckpt.Get("cls_embedding.cap_proj.fc1.weight", {d, c.cond_dim}));
      // Upstream LlamaGen's caption MLP has no biases (nn.Linear(..., bias=False)); the
      // bundled fixtures were written with them. Either layout loads; an absent bias is none.
      MULO_ASSIGN_OR_RETURN(cap_fc1_b_, ckpt.GetOptional("cls_embedding.cap_proj.fc1.bias", {d}));
      MULO_ASSIGN_OR_RETURN(cap_fc2_w_, ckpt.Get("cls_embedding.cap_proj.fc2.weight", {d, d}));
      MULO_ASSIGN_OR_RETURN(cap_fc2_b_, ckpt.GetOptional("cls_embedding.cap_proj.fc2.bias", {d}));
      MULO_ASSIGN_OR_RETURN(uncond_embedding_, ckpt.Get("cls_embedding.uncond_embedding",
                                                        {c.cls_token_num, c.cond_dim}));
      break;
    }
    case ConditionMode::kPromptIds:  // never parsed for this architecture
      return InvalidArgumentError("condition: a llamagen transformer takes no prompt ids");
  }
  condition_shape_ = ConditionShape{c.condition_mode, c.cls_token_num, c.cond_dim, c.num_classes};
  MULO_RETURN_IF_ERROR(LoadLayers(
      ckpt, c.n_layer, BlockShape{c.dim, c.n_head, c.n_kv_head, c.ffn_hidden_dim, c.norm_eps}));
  MULO_ASSIGN_OR_RETURN(norm_, ckpt.Get("norm.weight", {d}));
  MULO_ASSIGN_OR_RETURN(output_, ckpt.Get("output.weight", {c.vocab_size, d}));
  return OkStatus();
}

StatusOr<torch::Tensor> Transformer::EmbedCondition(const Condition& condition,
                                                    bool with_null) const {
  const auto& c = config_;
  if (c.condition_mode == ConditionMode::kClassLabel) {
    MULO_RETURN_IF_ERROR(CheckClassLabel(condition_shape_, condition.class_label));
  } else {
    const auto& f = condition.features;
    if (!f.defined() || f.dim() != 2 || f.size(0) != c.cls_token_num || f.size(1) != c.cond_dim ||
        !f.is_floating_point()) {
      return InvalidArgumentError("condition.features: expected float [" +
                                  std::to_string(c.cls_token_num) + ", " +
                                  std::to_string(c.cond_dim) + "], found " + TensorShape(f));
    }
  }
  MULO_RETURN_IF_ERROR(CheckCaptionLength(condition_shape_, condition.caption_length));
  return GuardTorch("EmbedCondition", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    if (c.condition_mode == ConditionMode::kClassLabel) {
      std::vector<int64_t> labels = {condition.class_label};
      if (with_null) labels.push_back(c.num_classes);  // the null class row
      auto ids = torch::tensor(labels, torch::kInt64).to(class_table_.device());
      return class_table_.index_select(0, ids).unsqueeze(1);
    }
    auto features = condition.features.to(options()).unsqueeze(0);
    if (c.condition_mode == ConditionMode::kClipCond) {
      if (with_null) features = torch::cat({features, torch::zeros_like(features)});
      return torch::linear(features, clip_proj_w_, clip_proj_b_);
    }
    if (with_null) features = torch::cat({features, uncond_embedding_.unsqueeze(0)});
    if (condition.caption_length != 0) {
      // Upstream masks the padded (first) positions out of every row's attention in both
      // guidance halves and lets each attend only to itself: nothing downstream ever sees
      // them, so they need not run. Prefill places the rest at their own positions.
      features =
          features.narrow(1, c.cls_token_num - condition.caption_length, condition.caption_length);
    }
    auto h = torch::gelu(torch::linear(features, cap_fc1_w_, cap_fc1_b_), "tanh");
    return torch::linear(h, cap_fc2_w_, cap_fc2_b_);
  });
}

int64_t Transformer::CacheRows(int64_t /*condition_rows*/) const {
  // Positions are absolute (a shortened caption leaves a gap): the longest sequence bounds it.
  return config_.max_positions();
}

int64_t Transformer::TokenPosition(int64_t /*condition_rows*/, int64_t raster_index) const {
  return config_.cls_token_num + raster_index;
}

torch::Tensor Transformer::ConditionPositions(int64_t rows) const {
  // The last `rows` condition positions (all of them unless a caption was left-padded).
  return torch::arange(config_.cls_token_num - rows, config_.cls_token_num, torch::kInt64);
}

}  // namespace mulo::engine
