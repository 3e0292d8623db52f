// The encoder of T5 v1.1 (FLAN-T5-XL is LlamaGen t2i's text encoder), in the component layout
// tools/convert/hf_t5_encoder.py writes: config.json {architecture "t5_encoder", d_model,
// d_kv, d_ff, num_layers, num_heads, vocab_size, num_buckets, max_distance, norm_eps} and
// model.safetensors with the encoder's own tensor names (embed_tokens, block.{i}.layer.{0,1}.*,
// final_layer_norm).
//
// Per block: RMS layer norm, self-attention without biases and without 1/sqrt(d) scaling plus
// a relative position bias (block 0's table, shared by every block; bidirectional buckets,
// exact below buckets / 4, logarithmic to max_distance), residual; layer norm, gated GELU
// (tanh) FFN, residual; then the final norm. Padded keys get float32's lowest value added.
// Reference: tools/reference/t5.py (tests/engine/model/t5_encoder_parity_test.cc).
#ifndef MULO_ENGINE_MODEL_T5_ENCODER_H_
#define MULO_ENGINE_MODEL_T5_ENCODER_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"

namespace mulo::engine {

struct T5EncoderConfig {
  int64_t d_model = 0;
  int64_t d_kv = 0;
  int64_t d_ff = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t vocab_size = 0;
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
  double norm_eps = 1e-6;
};

class T5Encoder {
 public:
  static StatusOr<std::shared_ptr<const T5Encoder>> LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options);

  const T5EncoderConfig& config() const { return config_; }

  // ids int64 [B, n], mask [B, n] (nonzero = a token, 0 = padding) -> features float32
  // [B, n, d_model] (padded positions too, as upstream computes them). INVALID_ARGUMENT
  // naming `ids` or `mask` for bad shapes or ids outside the vocabulary.
  StatusOr<torch::Tensor> Encode(const torch::Tensor& ids, const torch::Tensor& mask) const;

  // The bucket of each relative position key - query (exposed for tests).
  static torch::Tensor RelativeBuckets(const torch::Tensor& relative, int64_t num_buckets,
                                       int64_t max_distance);

 private:
  struct Block {
    torch::Tensor q, k, v, o, attention_norm, wi_0, wi_1, wo, ffn_norm;
  };
  T5Encoder() = default;

  T5EncoderConfig config_;
  torch::Tensor embed_tokens_, relative_bias_, final_norm_;
  std::vector<Block> blocks_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_T5_ENCODER_H_
