#include "engine/model/vq_decoder.h"

#include "engine/core/torch_guard.h"

namespace mulo::engine {
namespace {

torch::Tensor Swish(const torch::Tensor& x) { return x * torch::sigmoid(x); }

// Reads `<prefix>.weight` / `<prefix>.bias` of a conv with the given geometry.
template <typename ConvT>
Status LoadConv(Checkpoint& ckpt, const std::string& prefix, int64_t cin, int64_t cout,
                int64_t kernel, ConvT* conv) {
  MULO_ASSIGN_OR_RETURN(conv->weight, ckpt.Get(prefix + ".weight", {cout, cin, kernel, kernel}));
  MULO_ASSIGN_OR_RETURN(conv->bias, ckpt.Get(prefix + ".bias", {cout}));
  return OkStatus();
}

template <typename NormT>
Status LoadNorm(Checkpoint& ckpt, const std::string& prefix, int64_t channels, NormT* norm) {
  MULO_ASSIGN_OR_RETURN(norm->weight, ckpt.Get(prefix + ".weight", {channels}));
  MULO_ASSIGN_OR_RETURN(norm->bias, ckpt.Get(prefix + ".bias", {channels}));
  return OkStatus();
}

template <typename ResT>
Status LoadRes(Checkpoint& ckpt, const std::string& p, int64_t cin, int64_t cout, ResT* b) {
  MULO_RETURN_IF_ERROR(LoadNorm(ckpt, p + ".norm1", cin, &b->norm1));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".conv1", cin, cout, 3, &b->conv1));
  MULO_RETURN_IF_ERROR(LoadNorm(ckpt, p + ".norm2", cout, &b->norm2));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".conv2", cout, cout, 3, &b->conv2));
  if (cin != cout) MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".nin_shortcut", cin, cout, 1, &b->nin_shortcut));
  return OkStatus();
}

template <typename AttnT>
Status LoadAttn(Checkpoint& ckpt, const std::string& p, int64_t c, AttnT* b) {
  MULO_RETURN_IF_ERROR(LoadNorm(ckpt, p + ".norm", c, &b->norm));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".q", c, c, 1, &b->q));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".k", c, c, 1, &b->k));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".v", c, c, 1, &b->v));
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".proj_out", c, c, 1, &b->proj_out));
  return OkStatus();
}

template <typename ConvT>
torch::Tensor ApplyConv(const torch::Tensor& x, const ConvT& conv) {
  const int64_t pad = conv.weight.size(2) / 2;
  return torch::conv2d(x, conv.weight, conv.bias, /*stride=*/1, /*padding=*/pad);
}

}  // namespace

StatusOr<std::shared_ptr<const VqDecoder>> VqDecoder::Load(const VqConfig& config,
                                                           const std::string& weights_path,
                                                           const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(weights_path, options));
  std::shared_ptr<VqDecoder> model(new VqDecoder(config));
  MULO_RETURN_IF_ERROR(GuardTorch(weights_path, [&] { return model->LoadWeights(checkpoint); }));
  return std::shared_ptr<const VqDecoder>(std::move(model));
}

StatusOr<std::shared_ptr<const VqDecoder>> VqDecoder::LoadDirectory(const std::string& dir,
                                                                    const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(VqConfig config, LoadVqConfig(dir + "/config.json"));
  return Load(config, dir + "/model.safetensors", options);
}

Status VqDecoder::LoadWeights(Checkpoint& ckpt) {
  at::NoGradGuard no_grad;
  const auto& c = config_;
  const int64_t levels = static_cast<int64_t>(c.ch_mult.size());
  MULO_ASSIGN_OR_RETURN(codebook_, ckpt.Get("quantize.embedding.weight",
                                            {c.codebook_size, c.codebook_embed_dim}));
  raw_codebook_ = codebook_;
  if (c.codebook_l2_norm) {
    // F.normalize(p=2, dim=-1, eps=1e-12), as upstream's get_codebook_entry.
    codebook_ = codebook_ / codebook_.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12);
  }
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, "post_quant_conv", c.codebook_embed_dim, c.z_channels, 1,
                                &post_quant_conv_));
  int64_t block_in = c.ch * c.ch_mult.back();
  MULO_RETURN_IF_ERROR(LoadConv(ckpt, "decoder.conv_in", c.z_channels, block_in, 3, &conv_in_));
  MULO_RETURN_IF_ERROR(LoadRes(ckpt, "decoder.mid.0", block_in, block_in, &mid_res0_));
  MULO_RETURN_IF_ERROR(LoadAttn(ckpt, "decoder.mid.1", block_in, &mid_attn_));
  MULO_RETURN_IF_ERROR(LoadRes(ckpt, "decoder.mid.2", block_in, block_in, &mid_res1_));
  for (int64_t level = 0; level < levels; ++level) {
    const std::string p = "decoder.conv_blocks." + std::to_string(level);
    const int64_t block_out = c.ch * c.ch_mult[levels - level - 1];
    Level l;
    for (int64_t i = 0; i <= c.num_res_blocks; ++i) {
      ResBlock res;
      MULO_RETURN_IF_ERROR(
          LoadRes(ckpt, p + ".res." + std::to_string(i), block_in, block_out, &res));
      l.res.push_back(std::move(res));
      block_in = block_out;
      if (level == 0) {
        AttnBlock attn;
        MULO_RETURN_IF_ERROR(LoadAttn(ckpt, p + ".attn." + std::to_string(i), block_in, &attn));
        l.attn.push_back(std::move(attn));
      }
    }
    if (level != levels - 1) {
      MULO_RETURN_IF_ERROR(LoadConv(ckpt, p + ".upsample.conv", block_in, block_in, 3, &l.upsample));
    }
    levels_.push_back(std::move(l));
  }
  MULO_RETURN_IF_ERROR(LoadNorm(ckpt, "decoder.norm_out", block_in, &norm_out_));
  MULO_RETURN_IF_ERROR(
      LoadConv(ckpt, "decoder.conv_out", block_in, c.out_channels, 3, &conv_out_));
  return OkStatus();
}

torch::Tensor VqDecoder::GroupNorm(const torch::Tensor& x, const Norm& n) const {
  return torch::group_norm(x, config_.norm_groups, n.weight, n.bias, 1e-6);
}

torch::Tensor VqDecoder::Res(const torch::Tensor& x, const ResBlock& b) const {
  auto h = ApplyConv(Swish(GroupNorm(x, b.norm1)), b.conv1);
  h = ApplyConv(Swish(GroupNorm(h, b.norm2)), b.conv2);
  auto shortcut = b.nin_shortcut.weight.defined() ? ApplyConv(x, b.nin_shortcut) : x;
  return shortcut + h;
}

torch::Tensor VqDecoder::Attn(const torch::Tensor& x, const AttnBlock& b) const {
  auto h = GroupNorm(x, b.norm);
  auto q = ApplyConv(h, b.q), k = ApplyConv(h, b.k), v = ApplyConv(h, b.v);
  const int64_t bs = q.size(0), c = q.size(1), hh = q.size(2), ww = q.size(3);
  auto qf = q.reshape({bs, c, hh * ww}).permute({0, 2, 1});
  auto kf = k.reshape({bs, c, hh * ww});
  auto w = torch::softmax(torch::bmm(qf, kf) * std::pow(static_cast<double>(c), -0.5), 2);
  auto out = torch::bmm(v.reshape({bs, c, hh * ww}), w.permute({0, 2, 1}));
  return x + ApplyConv(out.reshape({bs, c, hh, ww}), b.proj_out);
}

torch::Tensor VqDecoder::Forward(const torch::Tensor& z) const {
  auto h = ApplyConv(z, conv_in_);
  h = Res(h, mid_res0_);
  h = Attn(h, mid_attn_);
  h = Res(h, mid_res1_);
  for (const Level& level : levels_) {
    for (size_t i = 0; i < level.res.size(); ++i) {
      h = Res(h, level.res[i]);
      if (!level.attn.empty()) h = Attn(h, level.attn[i]);
    }
    if (level.upsample.weight.defined()) {
      h = torch::upsample_nearest2d(h, {h.size(2) * 2, h.size(3) * 2});
      h = ApplyConv(h, level.upsample);
    }
  }
  return ApplyConv(Swish(GroupNorm(h, norm_out_)), conv_out_);
}

StatusOr<torch::Tensor> VqDecoder::Decode(const torch::Tensor& ids, int64_t h, int64_t w) const {
  if (!ids.defined() || ids.dim() != 2 || ids.size(1) != h * w ||
      ids.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("ids: expected int64 [batch, " + std::to_string(h * w) + "]");
  }
  return GuardTorch("VqDecoder::Decode", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 ||
                            ids.max().item<int64_t>() >= config_.codebook_size)) {
      return InvalidArgumentError("ids: token ids must be in [0, " +
                                  std::to_string(config_.codebook_size) + ")");
    }
    auto z = codebook_.index_select(0, ids.to(codebook_.device()).flatten());
    z = z.view({ids.size(0), h, w, config_.codebook_embed_dim}).permute({0, 3, 1, 2});
    z = ApplyConv(z.contiguous(), post_quant_conv_);
    return Forward(z);
  });
}

StatusOr<RgbImage> VqDecoder::DecodeToRgb(const std::vector<int32_t>& ids, int64_t h,
                                          int64_t w, PixelRounding rounding) const {
  if (static_cast<int64_t>(ids.size()) != h * w) {
    return InvalidArgumentError("ids: expected " + std::to_string(h * w) + " tokens, found " +
                                std::to_string(ids.size()));
  }
  auto id_tensor =
      torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kInt64).view({1, h * w});
  MULO_ASSIGN_OR_RETURN(torch::Tensor image, Decode(id_tensor, h, w));
  return GuardTorch("VqDecoder::DecodeToRgb", [&]() -> StatusOr<RgbImage> {
    auto levels = torch::clamp(image.to(torch::kFloat32) * 0.5 + 0.5, 0.0, 1.0) * 255.0;
    if (rounding == PixelRounding::kNearest) levels = (levels + 0.5).floor();
    auto x = levels.to(torch::kUInt8)
                 .squeeze(0)
                 .permute({1, 2, 0})
                 .contiguous()
                 .to(torch::kCPU);
    RgbImage out;
    out.height = x.size(0);
    out.width = x.size(1);
    out.pixels.assign(x.data_ptr<uint8_t>(), x.data_ptr<uint8_t>() + x.numel());
    return out;
  });
}

}  // namespace mulo::engine
