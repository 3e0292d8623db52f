// A LLaMA / Qwen2 causal language model (Tar's MLLM stage is Qwen2.5-1.5B-Instruct with image
// tokens added), in the component layout tools/convert/hf_causal_lm.py writes from a Hugging
// Face directory: config.json {architecture "qwen2" | "llama", dim, n_layer, n_head, n_kv_head,
// vocab_size, ffn_hidden_dim, norm_eps, rope_theta, qkv_bias, tie_word_embeddings,
// max_positions, and for a model that writes images image_token_offset, image_token_count}
// and model.safetensors with the engine's block keys (block.h).
//
// Positions are 1D rotary ones (frequencies theta^(-2i/d), on interleaved pairs: the converter
// reorders q and k rows to match); the output head is the embedding matrix when tied.
// Reference: tools/reference/qwen2.py (tests/engine/model/causal_lm_parity_test.cc).
//
// Two faces:
//   - text: Forward / GreedyContinuation over the whole vocabulary (the parity tests);
//   - image tokens (TokenModel, loaded with a grid): the condition is the prompt's text ids at
//     positions [0, n); image token k is text id image_token_offset + k, fed at n + raster
//     index, and the logits cover the image tokens only, so every decoding method draws inside
//     that range (generation constrained to image tokens) over the shared decoder-only forward.
#ifndef MULO_ENGINE_MODEL_CAUSAL_LM_H_
#define MULO_ENGINE_MODEL_CAUSAL_LM_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/decoder_only_model.h"
#include "engine/model/kv_cache.h"

namespace mulo::engine {

struct CausalLmConfig {
  std::string architecture;  // "qwen2" or "llama"
  int64_t dim = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t vocab_size = 0;
  int64_t ffn_hidden_dim = 0;
  double norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool qkv_bias = false;
  bool tie_word_embeddings = false;
  int64_t max_positions = 0;
  // The image tokens' text ids [offset, offset + count) (Tar: <I0> .. <I65535>); count 0: a
  // text-only model.
  int64_t image_token_offset = 0;
  int64_t image_token_count = 0;

  int64_t head_dim() const { return dim / n_head; }
};

// The language model's fields of <path> (config.json), its `architecture` one of
// `architectures` (janus_model.h reads its LLaMA through this too).
StatusOr<CausalLmConfig> LoadCausalLmConfig(
    const std::string& path, const std::vector<std::string>& architectures = {"qwen2", "llama"});

// A language model's prompt: 1..rows ids inside [0, vocab_size), or INVALID_ARGUMENT naming
// prompt_ids (`image` says what follows the prompt, e.g. "576 image codes").
Status CheckPromptIds(const std::vector<int64_t>& ids, int64_t rows, int64_t vocab_size,
                      const std::string& image);

// The rotary table [max_positions, head_dim / 2, 2] (cos, sin) of a LLaMA-family model, as
// upstream computes it in float32: frequency i is theta^(-2i/d).
torch::Tensor RotaryTable(const CausalLmConfig& config, const torch::Device& device);

class CausalLm : public DecoderOnlyModel {
 public:
  // <dir>/config.json + <dir>/model.safetensors. With grid_size > 0 the model writes
  // grid_size^2 image tokens as a TokenModel (the config must name its image tokens).
  static StatusOr<std::shared_ptr<const CausalLm>> LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options,
                                                                  int64_t grid_size = 0);

  const CausalLmConfig& config() const { return config_; }

  // Text: tokens int64 [B, n] at positions cache.length() .. + n - 1, each attending the cached
  // rows and the new ones up to itself; the cache keeps them. Logits float32 [B, n, V] over the
  // whole text vocabulary (or [B, 1, V] for the last position only with `last_only`).
  // INVALID_ARGUMENT naming `tokens` for ids outside the vocabulary or positions past
  // max_positions.
  StatusOr<torch::Tensor> Forward(KvCache& cache, const torch::Tensor& tokens,
                                  bool last_only = false) const;
  using DecoderOnlyModel::Forward;

  // `steps` argmax tokens after `prompt` (one prefill, then one token per forward).
  StatusOr<std::vector<int64_t>> GreedyContinuation(const std::vector<int64_t>& prompt,
                                                    int64_t steps) const;

  // TokenModel (image tokens).
  std::string architecture() const override { return config_.architecture; }
  int64_t grid_size() const override { return grid_size_; }
  const ConditionShape& condition_shape() const override { return condition_shape_; }
  int64_t CacheRows(int64_t condition_rows) const override;
  // The prompt's text ids (Condition::prompt_ids) through the text embedding; no guidance
  // (INVALID_ARGUMENT naming cfg_scale with `with_null`: Tar's MLLM samples without it).
  StatusOr<torch::Tensor> EmbedCondition(const Condition& condition,
                                         bool with_null) const override;
  torch::Tensor ConditionPositions(int64_t rows) const override;
  int64_t TokenPosition(int64_t condition_rows, int64_t raster_index) const override;

 private:
  CausalLm() = default;

  CausalLmConfig config_;
  int64_t grid_size_ = 0;
  ConditionShape condition_shape_;
  torch::Tensor text_embeddings_, text_output_;  // [vocab_size, dim]: the whole vocabulary
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CAUSAL_LM_H_
