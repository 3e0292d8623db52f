// MuLo-SD's learned up-sampler U_r and down-sampler D_r (reference:
// tools/reference/resampler.py). Small convolutional nets on codebook vectors whose every
// convolution is row-causal (an output row depends only on input rows at or above it), ending
// in codebook logits; argmax quantises to the codebook.
//   up:   drafter ids [B, h*w]            -> target logits  [B, V, r*h, r*w]
//   down: target ids  [B, (r*h)*(r*w)]    -> drafter logits [B, V, h, w]
#ifndef MULO_ENGINE_MODEL_RESAMPLER_H_
#define MULO_ENGINE_MODEL_RESAMPLER_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/packed_gemms.h"

namespace mulo::engine {

struct ResamplerConfig {
  bool up = true;  // "kind": "up" | "down"
  int64_t factor = 2;
  int64_t channels = 0;
  int64_t num_blocks = 0;
  int64_t codebook_size = 0;
  int64_t codebook_embed_dim = 0;
};

// One image's Apply inside Resampler::ApplyBatch.
struct ResampleCall {
  torch::Tensor ids;  // [1, h * w] int64 on the input grid
  int64_t h = 0, w = 0;
  // Ids the engine drew itself, possibly still on the device: their range is not checked,
  // since reading them back for it would be a host synchronisation on a GPU.
  bool drawn = false;
};

class Resampler {
 public:
  static StatusOr<std::shared_ptr<const Resampler>> LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options);

  const ResamplerConfig& config() const { return config_; }
  // The output grid of an h x w input grid.
  int64_t OutputRows(int64_t h) const {
    return config_.up ? h * config_.factor : h / config_.factor;
  }
  int64_t OutputCols(int64_t w) const {
    return config_.up ? w * config_.factor : w / config_.factor;
  }
  // The L2-normalised codebook the logits are computed against [V, e].
  const torch::Tensor& codebook() const { return codebook_; }

  // ids [B, h * w] on the input grid (h x w) -> logits [B, V, H, W] on the output grid.
  StatusOr<torch::Tensor> Logits(const torch::Tensor& ids, int64_t h, int64_t w) const;
  // The argmax ids [B, H * W] (raster order) of Logits.
  StatusOr<torch::Tensor> Apply(const torch::Tensor& ids, int64_t h, int64_t w) const;
  // Apply for one image held on the host, the form MuLo-SD's loop and the benchmarks keep
  // token ids in: h * w ids in, H * W ids out.
  StatusOr<std::vector<int64_t>> Apply(const std::vector<int64_t>& ids, int64_t h, int64_t w) const;

  // Apply for ids the engine drew (ResampleCall::drawn): shapes checked, values trusted, no
  // host read; the ids out stay where the model is.
  StatusOr<torch::Tensor> ApplyDrawn(const torch::Tensor& ids, int64_t h, int64_t w) const;

  // The errors Logits returns for these arguments (EngineLoop refuses a bad call before
  // it reaches a batch, where it would fail the others' calls too); with `values` false only
  // the shapes (drawn ids).
  Status CheckIds(const torch::Tensor& ids, int64_t h, int64_t w, bool values = true) const;

  // Several images' Apply at once. kShared stacks images of one width into one batch, each
  // padded at the bottom to the tallest: every convolution is row-causal, so padding rows
  // never reach the real ones, and one convolution per layer serves every image (LibTorch then
  // takes its oneDNN kernels, whose last bits differ from a lone image's, so an argmax may
  // differ where two codes tie to the last bits). kPerSequence (and images of different
  // widths) applies each image alone: on a CPU a lone image's bits need its own convolutions.
  StatusOr<std::vector<torch::Tensor>> ApplyBatch(const std::vector<ResampleCall>& calls,
                                                  PackedGemms gemms) const;

 private:
  struct Conv {
    torch::Tensor weight, bias;
  };
  struct ResBlock {
    torch::Tensor norm1, norm2;
    Conv conv1, conv2;
  };

  Resampler() = default;
  // Logits of ids that CheckIds accepted (no checks; the caller guards torch errors).
  torch::Tensor CheckedLogits(const torch::Tensor& ids, int64_t h, int64_t w) const;
  torch::Tensor RowCausal(const torch::Tensor& x, const Conv& conv) const;

  ResamplerConfig config_;
  torch::Tensor codebook_;  // L2-normalised [V, e]
  Conv conv_in_, conv_out_;
  std::vector<ResBlock> blocks_;
  torch::Tensor norm_out_, logit_scale_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_RESAMPLER_H_
