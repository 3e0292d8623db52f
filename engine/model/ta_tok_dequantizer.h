// Tar's TA-Tok de-quantiser (TextAlignedTokenizer.decode_from_bottleneck; reference:
// tools/reference/ta_tok.py): the image tokens a Tar MLLM emits -> the condition features
// Tar's AR-DTok models take through clip_proj. Converted from ta_tok.pth by
// tools/convert/convert.py ta-tok, upstream key names.
//
//   ids [n], n = p * p -> SimVQ codebook row (embedding_proj(embedding), L2-normalised when
//   trained so) -> bottleneck.out_linear -> SigLIP2 vision transformer over the p x p grid
//   (patch size 1: patch_embedding + the position table resized bilinearly with antialiasing
//   to p x p; pre-LN encoder layers, gelu-tanh MLP, full attention) -> post_layernorm ->
//   decode_task_layer (Linear, Tanh, Linear) -> features [n, hidden].
#ifndef MULO_ENGINE_MODEL_TA_TOK_DEQUANTIZER_H_
#define MULO_ENGINE_MODEL_TA_TOK_DEQUANTIZER_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"

namespace mulo::engine {

struct TaTokConfig {
  int64_t codebook_size = 0;
  int64_t bottleneck_dim = 0;
  bool l2_normalized = false;
  int64_t in_dim = 0;  // out_linear's width = the decoder's patch_embedding input
  int64_t hidden = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t intermediate = 0;
  int64_t num_patches = 0;  // the position table, a square
  double layer_norm_eps = 1e-6;
};

class TaTokDequantizer {
 public:
  // <dir>/config.json + <dir>/model.safetensors.
  static StatusOr<std::shared_ptr<const TaTokDequantizer>> LoadDirectory(
      const std::string& dir, const LoadOptions& options);

  const TaTokConfig& config() const { return config_; }

  // Whether n ids form a grid the tokenizer emits (a square of at least one).
  static bool IsSquare(int64_t n);

  // Ids Decode takes: a square count, each in [0, codebook_size). INVALID_ARGUMENT naming
  // "condition_tokens" otherwise.
  Status CheckIds(const std::vector<int64_t>& ids) const;

  // ids (CheckIds) -> features [n, hidden] (float32, on the model's device).
  StatusOr<torch::Tensor> Decode(const std::vector<int64_t>& ids) const;

 private:
  struct Linear {
    torch::Tensor weight, bias;
    torch::Tensor operator()(const torch::Tensor& x) const {
      return torch::linear(x, weight, bias);
    }
  };
  struct LayerNorm {
    torch::Tensor weight, bias;
  };
  struct Layer {
    LayerNorm norm1, norm2;
    Linear q, k, v, out, fc1, fc2;
  };

  explicit TaTokDequantizer(TaTokConfig config) : config_(config) {}
  Status LoadWeights(Checkpoint& ckpt);
  torch::Tensor Norm(const torch::Tensor& x, const LayerNorm& n) const;
  torch::Tensor Attention(const torch::Tensor& x, const Layer& layer) const;
  // The position table resized to p x p: [p * p, hidden].
  torch::Tensor Positions(int64_t p) const;

  TaTokConfig config_;
  torch::Tensor embedding_;
  Linear embedding_proj_, out_linear_, patch_embedding_, task_in_, task_out_;
  torch::Tensor position_embedding_;
  std::vector<Layer> layers_;
  LayerNorm post_layernorm_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TA_TOK_DEQUANTIZER_H_
