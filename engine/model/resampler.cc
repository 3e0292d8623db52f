#include "engine/model/resampler.h"

#include <algorithm>

#include "engine/core/device_upload.h"
#include "engine/core/host_read.h"
#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

StatusOr<ResamplerConfig> ParseConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  ResamplerConfig c;
  MULO_ASSIGN_OR_RETURN(std::string kind, f.Enum("kind", {"up", "down"}));
  c.up = kind == "up";
  MULO_ASSIGN_OR_RETURN(c.factor, f.Int("factor", 2, 16));
  MULO_ASSIGN_OR_RETURN(c.channels, f.Int("channels", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(c.num_blocks, f.Int("num_blocks", 0, 256));
  MULO_ASSIGN_OR_RETURN(c.codebook_size, f.Int("codebook_size", 2, 1 << 20));
  MULO_ASSIGN_OR_RETURN(c.codebook_embed_dim, f.Int("codebook_embed_dim", 1, 4096));
  return c;
}

// Per-pixel RMS norm over channels (norms across rows would break row causality).
torch::Tensor PixelRmsNorm(const torch::Tensor& x, const torch::Tensor& weight) {
  return x * torch::rsqrt(x.pow(2).mean(1, /*keepdim=*/true) + 1e-6) *
         weight.view({1, -1, 1, 1});
}

}  // namespace

StatusOr<std::shared_ptr<const Resampler>> Resampler::LoadDirectory(const std::string& dir,
                                                                    const LoadOptions& options) {
  std::shared_ptr<Resampler> m(new Resampler());
  MULO_ASSIGN_OR_RETURN(m->config_, ParseConfig(dir + "/config.json"));
  const auto& c = m->config_;
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  const int64_t e = c.codebook_embed_dim, r2 = c.factor * c.factor, ch = c.channels;
  auto conv = [&](const std::string& name, int64_t cin, int64_t cout, int64_t k,
                  Conv* out) -> Status {
    MULO_ASSIGN_OR_RETURN(out->weight, ckpt.Get(name + ".weight", {cout, cin, k, k}));
    MULO_ASSIGN_OR_RETURN(out->bias, ckpt.Get(name + ".bias", {cout}));
    return OkStatus();
  };
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(m->codebook_, ckpt.Get("codebook", {c.codebook_size, e}));
    MULO_RETURN_IF_ERROR(conv("conv_in", c.up ? e : e * r2, ch, 3, &m->conv_in_));
    for (int64_t i = 0; i < c.num_blocks; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".";
      ResBlock b;
      MULO_ASSIGN_OR_RETURN(b.norm1, ckpt.Get(p + "norm1.weight", {ch}));
      MULO_ASSIGN_OR_RETURN(b.norm2, ckpt.Get(p + "norm2.weight", {ch}));
      MULO_RETURN_IF_ERROR(conv(p + "conv1", ch, ch, 3, &b.conv1));
      MULO_RETURN_IF_ERROR(conv(p + "conv2", ch, ch, 3, &b.conv2));
      m->blocks_.push_back(std::move(b));
    }
    MULO_ASSIGN_OR_RETURN(m->norm_out_, ckpt.Get("norm_out.weight", {ch}));
    MULO_RETURN_IF_ERROR(conv("conv_out", ch, c.up ? e * r2 : e, 1, &m->conv_out_));
    MULO_ASSIGN_OR_RETURN(m->logit_scale_, ckpt.Get("logit_scale", {}));
    return OkStatus();
  }));
  return std::shared_ptr<const Resampler>(std::move(m));
}

torch::Tensor Resampler::RowCausal(const torch::Tensor& x, const Conv& conv) const {
  // Two rows of zero padding on top and none below: output row i sees input rows i-2 .. i.
  return torch::conv2d(torch::constant_pad_nd(x, {1, 1, 2, 0}), conv.weight, conv.bias);
}

Status Resampler::CheckIds(const torch::Tensor& ids, int64_t h, int64_t w, bool values) const {
  const auto& c = config_;
  if (h < 1 || w < 1) return InvalidArgumentError("ids: the grid must be at least 1 x 1");
  if (!ids.defined() || ids.dim() != 2 || ids.size(1) != h * w ||
      ids.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("ids: expected int64 [batch, " + std::to_string(h * w) + "]");
  }
  if (!c.up && (h % c.factor != 0 || w % c.factor != 0)) {
    return InvalidArgumentError("ids: grid must be divisible by the down-sampling factor");
  }
  if (!values) return OkStatus();
  return GuardTorch("Resampler::CheckIds", [&]() -> Status {
    if (ids.numel() > 0 &&
        (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= c.codebook_size)) {
      return InvalidArgumentError("ids: must be in [0, " + std::to_string(c.codebook_size) + ")");
    }
    return OkStatus();
  });
}

StatusOr<torch::Tensor> Resampler::Logits(const torch::Tensor& ids, int64_t h, int64_t w) const {
  MULO_RETURN_IF_ERROR(CheckIds(ids, h, w));
  return GuardTorch("Resampler::Logits", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    return CheckedLogits(ids, h, w);
  });
}

torch::Tensor Resampler::CheckedLogits(const torch::Tensor& ids, int64_t h, int64_t w) const {
  const auto& c = config_;
  auto x = codebook_.index_select(0, Upload(ids, codebook_.device()).flatten())
               .view({ids.size(0), h, w, c.codebook_embed_dim})
               .permute({0, 3, 1, 2});
  if (!c.up) x = torch::pixel_unshuffle(x, c.factor);
  x = RowCausal(x, conv_in_);
  for (const ResBlock& b : blocks_) {
    auto y = RowCausal(torch::silu(PixelRmsNorm(x, b.norm1)), b.conv1);
    x = x + RowCausal(torch::silu(PixelRmsNorm(y, b.norm2)), b.conv2);
  }
  x = torch::conv2d(torch::silu(PixelRmsNorm(x, norm_out_)), conv_out_.weight, conv_out_.bias);
  if (c.up) x = torch::pixel_shuffle(x, c.factor);
  x = x / x.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12);
  return logit_scale_ * torch::einsum("behw,ve->bvhw", {x, codebook_});
}

StatusOr<torch::Tensor> Resampler::Apply(const torch::Tensor& ids, int64_t h, int64_t w) const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor logits, Logits(ids, h, w));
  return logits.argmax(1).flatten(1);
}

StatusOr<torch::Tensor> Resampler::ApplyDrawn(const torch::Tensor& ids, int64_t h,
                                              int64_t w) const {
  MULO_RETURN_IF_ERROR(CheckIds(ids, h, w, /*values=*/false));
  return GuardTorch("Resampler::ApplyDrawn", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    return CheckedLogits(ids, h, w).argmax(1).flatten(1);
  });
}

StatusOr<std::vector<int64_t>> Resampler::Apply(const std::vector<int64_t>& ids, int64_t h,
                                                int64_t w) const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor out,
                        Apply(torch::tensor(ids, torch::kInt64).unsqueeze(0), h, w));
  return HostReadIds(out);
}

StatusOr<std::vector<torch::Tensor>> Resampler::ApplyBatch(const std::vector<ResampleCall>& calls,
                                                           PackedGemms gemms) const {
  bool stackable = gemms == PackedGemms::kShared;
  int64_t tallest = 0;
  for (const ResampleCall& call : calls) {
    MULO_RETURN_IF_ERROR(CheckIds(call.ids, call.h, call.w, !call.drawn));
    if (call.ids.size(0) != 1 || call.w != calls.front().w) stackable = false;
    tallest = std::max(tallest, call.h);
  }
  return GuardTorch("Resampler::ApplyBatch", [&]() -> StatusOr<std::vector<torch::Tensor>> {
    at::NoGradGuard no_grad;
    std::vector<torch::Tensor> outputs;
    if (!stackable) {
      for (const ResampleCall& call : calls) {
        outputs.push_back(CheckedLogits(call.ids, call.h, call.w).argmax(1).flatten(1));
      }
      return outputs;
    }
    const int64_t w = calls.front().w;
    std::vector<torch::Tensor> padded;
    for (const ResampleCall& call : calls) {
      // Id 0 below the image: any code will do, no real row reads it.
      padded.push_back(
          torch::constant_pad_nd(call.ids.reshape({call.h, w}), {0, 0, 0, tallest - call.h})
              .view({1, tallest * w}));
    }
    const torch::Tensor stacked =
        CheckedLogits(torch::cat(padded), tallest, w).argmax(1).flatten(1);
    for (size_t i = 0; i < calls.size(); ++i) {
      const int64_t rows = OutputRows(calls[i].h) * OutputCols(w);
      outputs.push_back(stacked.narrow(0, static_cast<int64_t>(i), 1).narrow(1, 0, rows));
    }
    return outputs;
  });
}

}  // namespace mulo::engine
