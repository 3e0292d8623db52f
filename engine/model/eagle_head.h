// EAGLE-style drafter head (reference: tools/reference/eagle_head.py): `fc` over
// concat(token embedding of x_{t+1}, target feature f_t), one decoder block with its own KV
// cache, predicting the feature f_{t+1}; logits come from the target's output head.
#ifndef MULO_ENGINE_MODEL_EAGLE_HEAD_H_
#define MULO_ENGINE_MODEL_EAGLE_HEAD_H_

#include <torch/torch.h>

#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"
#include "engine/model/kv_cache.h"
#include "engine/model/transformer.h"

namespace mulo::engine {

class EagleHead {
 public:
  // Loads <dir>/{config.json, model.safetensors}; its width must match `target`'s.
  static StatusOr<std::shared_ptr<const EagleHead>> LoadDirectory(const std::string& dir,
                                                                  const Transformer& target,
                                                                  const LoadOptions& options);

  KvCache NewCache(int64_t batch, int64_t capacity) const;

  // token_embeddings, features: [B, n, dim]; mask: optional [n, cache.length() + n] bool
  // (undefined = causal). Returns predicted next features [B, n, dim].
  StatusOr<torch::Tensor> Forward(KvCache& cache, const torch::Tensor& token_embeddings,
                                  const torch::Tensor& features, const torch::Tensor& mask) const;

 private:
  EagleHead() = default;

  BlockShape shape_;
  torch::Tensor fc_weight_, fc_bias_;
  Block block_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_EAGLE_HEAD_H_
