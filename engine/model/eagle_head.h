// EAGLE-style drafter head (reference: tools/reference/eagle_head.py): `fc` over
// concat(token embedding of x_{t+1}, target feature f_t), one decoder block with its own KV
// cache, predicting the feature f_{t+1}; logits come from the target's output head.
#ifndef MULO_ENGINE_MODEL_EAGLE_HEAD_H_
#define MULO_ENGINE_MODEL_EAGLE_HEAD_H_

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/block.h"
#include "engine/model/checkpoint.h"
#include "engine/model/kv_cache.h"
#include "engine/model/packed_gemms.h"
#include "engine/model/pool_graphs.h"
#include "engine/model/token_model.h"
#include "engine/model/transformer_config.h"

namespace mulo::engine {

// One cache's head forward inside EagleHead::ForwardBatch: the arguments of Forward.
struct HeadCall {
  KvCache* cache = nullptr;
  torch::Tensor token_embeddings;  // [cache batch, n, dim]
  torch::Tensor features;          // [cache batch, n, dim]
  torch::Tensor mask;              // optional [n, cache length + n] bool (undefined: causal)
};

class EagleHead {
 public:
  // Loads <dir>/{config.json, model.safetensors}; its width must match `target`'s.
  static StatusOr<std::shared_ptr<const EagleHead>> LoadDirectory(const std::string& dir,
                                                                  const TokenModel& target,
                                                                  const LoadOptions& options);

  KvCache NewCache(int64_t batch, int64_t capacity) const;
  // Whether the head runs from CUDA graphs (as its target does): over a pool of its caches
  // made with a scratch slot, CapturePoolGraphs captures them at load and Forward and
  // ForwardBatch over the pool's caches replay them (pool_graphs.h).
  bool uses_cuda_graphs() const { return cuda_graphs_; }
  StatusOr<std::shared_ptr<PoolGraphs>> CapturePoolGraphs(const KvPool& pool) const;
  // The head's forward over a slot-indexed view of its pool (PoolGraphs::Body: token
  // embeddings and features in, predicted features out), for graphs of whole drafting steps
  // (eagle_tree_graphs.h). Graph-capturable.
  PoolGraphs::Body SlotForward() const;

  // token_embeddings, features: [B, n, dim]; mask: optional [n, cache.length() + n] bool
  // (undefined = causal). Returns predicted next features [B, n, dim].
  StatusOr<torch::Tensor> Forward(KvCache& cache, const torch::Tensor& token_embeddings,
                                  const torch::Tensor& features, const torch::Tensor& mask) const;

  // The errors Forward returns, without running it (EngineLoop refuses a bad call before
  // it reaches a batch).
  Status CheckForward(const HeadCall& call) const;

  // Several caches' forwards at once (Block::ForwardPacked: shared norms and activations,
  // attention per cache, GEMMs as `gemms` says). With PackedGemms::kPerSequence outputs[i] is
  // Forward(calls[i]...) bit for bit on a CPU in float32. Every call is checked first.
  StatusOr<std::vector<torch::Tensor>> ForwardBatch(const std::vector<HeadCall>& calls,
                                                    PackedGemms gemms) const;

 private:
  EagleHead() = default;
  // `mask`, or the causal mask over the cache and n new rows when undefined and n > 1.
  torch::Tensor AttentionMask(const KvCache& cache, int64_t n, const torch::Tensor& mask) const;
  // concat(token embeddings, features) [B, n, 2 dim] in the head's dtype, and fc of it
  // [B, n, dim].
  torch::Tensor FcInput(const HeadCall& call) const;
  torch::Tensor Fuse(const HeadCall& call) const;
  // The pool graphs' batched forward (PoolGraphs::Body): token embeddings and features in,
  // predicted features out.
  std::vector<torch::Tensor> ForwardSlots(KvCache& view, const PoolGraphs::Inputs& in) const;
  // `calls` from their pool's graphs, as DecoderOnlyModel::ForwardFromPoolGraphs.
  std::optional<StatusOr<std::vector<torch::Tensor>>> ForwardFromPoolGraphs(
      const std::vector<HeadCall>& calls) const;

  BlockShape shape_;
  torch::Tensor fc_weight_, fc_bias_;
  Block block_;
  bool cuda_graphs_ = false, emulate_cuda_graphs_ = false;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_EAGLE_HEAD_H_
