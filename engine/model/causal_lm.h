// A LLaMA / Qwen2 causal language model (Tar's MLLM stage is Qwen2.5-1.5B-Instruct with image
// tokens added), in the component layout tools/convert/hf_causal_lm.py writes from a Hugging
// Face directory: config.json {architecture "qwen2" | "llama", dim, n_layer, n_head, n_kv_head,
// vocab_size, ffn_hidden_dim, norm_eps, rope_theta, qkv_bias, tie_word_embeddings,
// max_positions} and model.safetensors with the engine's block keys (block.h).
//
// Positions are 1D rotary ones (frequencies theta^(-2i/d), on interleaved pairs: the converter
// reorders q and k rows to match); the output head is the embedding matrix when tied.
// Reference: tools/reference/qwen2.py (tests/engine/model/causal_lm_test.cc).
//
// This is the model alone (forward over a KV cache, greedy continuation for the tests); its
// decoding through the methods and the server comes with the architecture interface
// (issue 43).
#ifndef MULO_ENGINE_MODEL_CAUSAL_LM_H_
#define MULO_ENGINE_MODEL_CAUSAL_LM_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"
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

  int64_t head_dim() const { return dim / n_head; }
};

StatusOr<CausalLmConfig> LoadCausalLmConfig(const std::string& path);

class CausalLm {
 public:
  static StatusOr<std::shared_ptr<const CausalLm>> LoadDirectory(const std::string& dir,
                                                                  const LoadOptions& options);

  const CausalLmConfig& config() const { return config_; }
  KvCache NewCache(int64_t batch, int64_t capacity) const;

  // tokens int64 [B, n] at positions cache.length() .. + n - 1, each attending the cached rows
  // and the new ones up to itself; the cache keeps them. Logits float32 [B, n, V] (or
  // [B, 1, V] for the last position only with `last_only`). INVALID_ARGUMENT naming `tokens`
  // for ids outside the vocabulary or positions past max_positions.
  StatusOr<torch::Tensor> Forward(KvCache& cache, const torch::Tensor& tokens,
                                  bool last_only = false) const;

  // `steps` argmax tokens after `prompt` (one prefill, then one token per forward).
  StatusOr<std::vector<int64_t>> GreedyContinuation(const std::vector<int64_t>& prompt,
                                                    int64_t steps) const;

 private:
  CausalLm() = default;

  CausalLmConfig config_;
  torch::Tensor tok_embeddings_, norm_, output_;
  std::vector<Block> layers_;
  torch::Tensor rope_;  // [max_positions, head_dim / 2, 2] cos / sin
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CAUSAL_LM_H_
