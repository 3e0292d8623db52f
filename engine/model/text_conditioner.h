// The bundled family's text conditioner (the analogue of Tar's TA-Tok features): a
// word-level tokenizer and a small bidirectional transformer whose output features
// [max_tokens, dim] condition every AR model of the family through its clip_proj.
// Reference: tools/reference/text_encoder.py. Directory layout: config.json, vocab.json
// (a JSON list, id -> word; 0 = <pad>, 1 = <unk>), model.safetensors.
#ifndef MULO_ENGINE_MODEL_TEXT_CONDITIONER_H_
#define MULO_ENGINE_MODEL_TEXT_CONDITIONER_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"

namespace mulo::engine {

struct TextConditionerConfig {
  int64_t vocab_size = 0;
  int64_t dim = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t max_tokens = 0;
  int64_t ffn_hidden_dim = 0;
  double norm_eps = 1e-5;
};

class TextConditioner {
 public:
  static StatusOr<std::shared_ptr<const TextConditioner>> LoadDirectory(
      const std::string& dir, const LoadOptions& options);

  const TextConditionerConfig& config() const { return config_; }

  // Lower-cased words, ':' and ',' as tokens of their own; unknown words map to <unk>.
  // INVALID_ARGUMENT naming "prompt" when it is empty or longer than max_tokens.
  StatusOr<std::vector<int64_t>> Tokenize(const std::string& prompt) const;

  // Features [max_tokens, dim] (float32) for a prompt.
  StatusOr<torch::Tensor> Encode(const std::string& prompt) const;

 private:
  TextConditioner() = default;

  TextConditionerConfig config_;
  std::unordered_map<std::string, int64_t> vocab_;
  torch::Tensor tok_embeddings_, pos_embeddings_, norm_;
  std::vector<Block> layers_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TEXT_CONDITIONER_H_
