// What a decoding method needs from a model of image tokens, whatever its architecture: the
// interface every method, ModelStream, the engine loop and the EAGLE head reach a model
// through (docs/design.md, "Architectures").
//
// A token model reads a condition (features, a class label, a caption, or the prompt's own
// text token ids), then the image's tokens in raster order over a KV cache, and predicts the
// next one over `vocab_size` image-token ids [0, vocab_size): a grid_size x grid_size raster.
// Implementations (engine/model/architectures.h lists them):
//   - Transformer (transformer.h): LlamaGen GPT / Tar AR-DTok, conditioned on features or a
//     class label, 2D RoPE or a learned position table.
//   - CausalLm (causal_lm.h): a LLaMA / Qwen2 language model whose image tokens are a range of
//     its text vocabulary (Tar's MLLM stage), conditioned on the prompt's token ids.
//   - JanusModel (janus_model.h): Janus-Pro, a LLaMA with image-token embeddings and a
//     generation head of its own, conditioned on the prompt's token ids with guidance.
// All share the decoder-only forward (decoder_only_model.h); a third architecture that does not
// may implement this interface directly.
#ifndef MULO_ENGINE_MODEL_TOKEN_MODEL_H_
#define MULO_ENGINE_MODEL_TOKEN_MODEL_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/condition.h"
#include "engine/model/kv_cache.h"
#include "engine/model/packed_gemms.h"
#include "engine/model/row_graphs.h"

namespace mulo::engine {

class KvPool;      // kv_pool.h
class PoolGraphs;  // pool_graphs.h

enum class LogitsMode {
  kAll,   // logits for every new position
  kLast,  // logits for the last new position only (prefill)
  kNone,  // hidden states only
};

struct ForwardOutput {
  torch::Tensor logits;  // [batch, n or 1, vocab] float32 (undefined for kNone)
  torch::Tensor hidden;  // [batch, n, dim]: final-norm output, the input of the output head
};

// One cache's forward inside TokenModel::ForwardBatch: the arguments of Forward.
struct ForwardCall {
  KvCache* cache = nullptr;
  torch::Tensor embeddings;  // [cache batch, n, dim]
  torch::Tensor positions;   // [n] int64
  torch::Tensor mask;        // optional [n, cache length + n] bool (undefined: causal)
  LogitsMode logits_mode = LogitsMode::kAll;
};

class TokenModel {
 public:
  virtual ~TokenModel() = default;

  // The architecture's registry name ("llamagen", "qwen2", "llama").
  virtual std::string architecture() const = 0;
  // Image-token ids are [0, vocab_size); logits have this width.
  virtual int64_t vocab_size() const = 0;
  // The image is grid_size x grid_size tokens in raster order.
  virtual int64_t grid_size() const = 0;
  int64_t num_image_tokens() const { return grid_size() * grid_size(); }
  // Width of hidden states and embeddings.
  virtual int64_t dim() const = 0;
  // What the model is conditioned on (the server's validation and ModelInfo read it).
  virtual const ConditionShape& condition_shape() const = 0;
  virtual torch::TensorOptions options() const = 0;
  // Whether NewCache attaches CUDA graphs.
  virtual bool uses_cuda_graphs() const = 0;

  // The CUDA graphs (or emulated ones) of this model's batched forward over `pool`, a pool of
  // its caches made with a scratch slot, captured now for every key (pool_graphs.h); null when
  // the model runs without graphs.
  virtual StatusOr<std::shared_ptr<PoolGraphs>> CapturePoolGraphs(const KvPool& pool) const {
    (void)pool;
    return std::shared_ptr<PoolGraphs>();
  }

  // What graphs of whole decode steps over this model's pool are made of (row_graphs.h:
  // ar's rows, a drafter's chains; verify_graphs.h: a chain's verification), or nullopt when
  // the model runs without graphs.
  virtual std::optional<RowGraphs::Model> StepGraphModel() const { return std::nullopt; }

  // An empty cache for `batch` streams (2 for classifier-free guidance).
  virtual KvCache NewCache(int64_t batch, int64_t capacity) const = 0;
  // The cache rows one request needs after `condition_rows` condition rows: the capacity its
  // streams are made with.
  virtual int64_t CacheRows(int64_t condition_rows) const = 0;

  // Condition embeddings [batch, rows, dim]; with `with_null`, row 1 is the null condition
  // (classifier-free guidance's unconditional stream) and batch = 2. INVALID_ARGUMENT naming
  // the condition's field when it does not fit the model.
  virtual StatusOr<torch::Tensor> EmbedCondition(const Condition& condition,
                                                 bool with_null) const = 0;
  // An empty cache and 1..condition_shape().rows condition rows (Prefill's checks).
  virtual Status CheckPrefill(const KvCache& cache,
                              const torch::Tensor& condition_embeddings) const = 0;
  // The sequence positions `rows` condition rows are fed at.
  virtual torch::Tensor ConditionPositions(int64_t rows) const = 0;
  // The sequence position of raster token i after `condition_rows` condition rows.
  virtual int64_t TokenPosition(int64_t condition_rows, int64_t raster_index) const = 0;
  // Condition embeddings [batch, n, dim] into an empty cache at ConditionPositions(n).
  StatusOr<ForwardOutput> Prefill(KvCache& cache, const torch::Tensor& condition_embeddings,
                                  LogitsMode logits_mode) const {
    MULO_RETURN_IF_ERROR(CheckPrefill(cache, condition_embeddings));
    return Forward(cache, condition_embeddings,
                   ConditionPositions(condition_embeddings.size(1)), torch::Tensor(),
                   logits_mode);
  }

  // Token embeddings [batch, n, dim] of image-token ids [batch, n] (range-checked), and of ids
  // the engine drew itself on the device (not range-checked: that would read them back).
  virtual StatusOr<torch::Tensor> EmbedTokens(const torch::Tensor& tokens) const = 0;
  virtual StatusOr<torch::Tensor> EmbedDrawnTokens(const torch::Tensor& tokens) const = 0;

  // Appends n new positions to `cache` and returns their outputs.
  //   embeddings: [batch, n, dim]; positions: [n] int64 sequence positions;
  //   mask: optional [n, cache.length() + n] bool, true where a new row may attend (undefined:
  //   causal).
  virtual StatusOr<ForwardOutput> Forward(KvCache& cache, const torch::Tensor& embeddings,
                                          const torch::Tensor& positions,
                                          const torch::Tensor& mask,
                                          LogitsMode logits_mode) const = 0;
  // Forward's checks alone, for callers that queue a forward to run later (EngineLoop).
  virtual Status CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                              const torch::Tensor& positions, const torch::Tensor& mask) const = 0;
  // Several caches' forwards in one pass (continuous batching); see DecoderOnlyModel.
  virtual StatusOr<std::vector<ForwardOutput>> ForwardBatch(const std::vector<ForwardCall>& calls,
                                                            PackedGemms gemms) const = 0;
  // EmbedTokens + Forward, causal or with a mask; may replay CUDA graphs.
  virtual StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                const torch::Tensor& positions,
                                                LogitsMode logits_mode) const = 0;
  virtual StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                const torch::Tensor& positions,
                                                const torch::Tensor& mask,
                                                LogitsMode logits_mode) const = 0;
  // ForwardTokens of ids drawn on the device (not range-checked).
  virtual StatusOr<ForwardOutput> ForwardDrawnTokens(KvCache& cache, const torch::Tensor& tokens,
                                                     const torch::Tensor& positions,
                                                     LogitsMode logits_mode) const = 0;

  // For heads over the model's hidden states (EAGLE): the output head applied to final-norm
  // hidden states [..., dim] -> float32 logits [..., vocab_size] (one matrix for most
  // architectures, a two-layer MLP for Janus-Pro's gen_head), and the image-token embedding
  // table [vocab_size, dim] (what the model reads for each image token).
  virtual torch::Tensor HeadLogits(const torch::Tensor& hidden) const = 0;
  virtual const torch::Tensor& token_embedding_weight() const = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_TOKEN_MODEL_H_
