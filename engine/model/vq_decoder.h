// LlamaGen VQ decoder: token ids -> L2-normalised codebook vectors -> post_quant_conv ->
// convolutional decoder -> RGB. Keys follow the upstream VQModel state_dict (decoder.*,
// quantize.embedding.weight, post_quant_conv.*); encoder keys, if present, are ignored.
#ifndef MULO_ENGINE_MODEL_VQ_DECODER_H_
#define MULO_ENGINE_MODEL_VQ_DECODER_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/vq_config.h"

namespace mulo::engine {

// How decoded values in [0, 255] become bytes: upstream LlamaGen (save_image) and our own
// families round to the nearest level; Tar's pipeline casts, which truncates.
enum class PixelRounding { kNearest, kTruncate };

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // row-major, 3 bytes per pixel (R, G, B)
};

class VqDecoder {
 public:
  static StatusOr<std::shared_ptr<const VqDecoder>> Load(const VqConfig& config,
                                                         const std::string& weights_path,
                                                         const LoadOptions& options);
  static StatusOr<std::shared_ptr<const VqDecoder>> LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options);

  const VqConfig& config() const { return config_; }

  // The codebook as used for lookup ([codebook_size, embed_dim], L2-normalised if configured).
  const torch::Tensor& codebook() const { return codebook_; }
  // The codebook weights as stored (before any L2 normalisation): LANTERN's neighbour order.
  const torch::Tensor& raw_codebook() const { return raw_codebook_; }

  // ids [batch, h * w] (raster order) -> float image [batch, 3, h * f, w * f], about [-1, 1].
  StatusOr<torch::Tensor> Decode(const torch::Tensor& ids, int64_t h, int64_t w) const;

  // One image of h x w tokens -> 8-bit RGB: clamp((x + 1) / 2) * 255, rounded (LlamaGen) or
  // truncated (Tar), as the family decodes.
  StatusOr<RgbImage> DecodeToRgb(const std::vector<int32_t>& ids, int64_t h, int64_t w,
                                 PixelRounding rounding = PixelRounding::kNearest) const;

 private:
  struct Conv {
    torch::Tensor weight, bias;
  };
  struct Norm {
    torch::Tensor weight, bias;
  };
  struct ResBlock {
    Norm norm1, norm2;
    Conv conv1, conv2, nin_shortcut;  // nin_shortcut undefined when channels do not change
  };
  struct AttnBlock {
    Norm norm;
    Conv q, k, v, proj_out;
  };
  struct Level {
    std::vector<ResBlock> res;
    std::vector<AttnBlock> attn;
    Conv upsample;  // undefined on the last level
  };

  explicit VqDecoder(VqConfig config) : config_(std::move(config)) {}
  Status LoadWeights(Checkpoint& ckpt);
  torch::Tensor Forward(const torch::Tensor& z) const;
  torch::Tensor GroupNorm(const torch::Tensor& x, const Norm& n) const;
  torch::Tensor Res(const torch::Tensor& x, const ResBlock& b) const;
  torch::Tensor Attn(const torch::Tensor& x, const AttnBlock& b) const;

  VqConfig config_;
  torch::Tensor codebook_, raw_codebook_;
  Conv post_quant_conv_, conv_in_, conv_out_;
  ResBlock mid_res0_, mid_res1_;
  AttnBlock mid_attn_;
  std::vector<Level> levels_;
  Norm norm_out_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_VQ_DECODER_H_
