// The enumerable test model of issue 58: a TokenModel whose next-token law is a TableLaw, so
// that every method can run on it and its sampled images can be compared with an exact law.
//
// Its KV cache holds, per row, the sequence position and the token fed there (one layer, one
// head of width 2), so everything a method does to a cache is exercised for real: tree and
// window masks, Keep (Compact), Truncate, batched forwards. Each new row reads the (position,
// token) pairs it attends to, and its logits are log Given(position + 1, pairs): a prefix sees
// the prefix table, any other visible set the partial law. A row whose visible set cannot be
// right (it does not see itself, misses the condition, sees a position twice or a position
// after its own) fails the forward with INTERNAL, so a wrong mask, a stale row left behind by
// a bad Keep or Truncate, or a tree row wired to the wrong parent ends the test at once rather
// than hiding in a statistic.
//
// Hidden states encode the context linearly (a constant, its length, its tokens newest first
// in a shift register), and a token's embedding carries the token in one coordinate. An
// EAGLE-style head whose fc shifts the register and writes the new token, and whose block adds
// nothing (attention and feed-forward outputs zero; WriteLinearEagleHead), therefore predicts
// exactly the feature of the extended context, and HeadLogits turns any such feature into the
// log of the head's own table: the head drafts from a table q[context] like every other
// drafter here, through the real EagleHead, EagleProposer and tree code.
//
// Guidance: the batch's first stream (the condition's) reads the table, the second (the null
// condition's) reads `unconditional` when one is given; otherwise both read the table and any
// cfg scale leaves the law unchanged. A test that wants a guided law L at scale s gives the
// model TableLaw::ConditionalFor(L, u, s) and u, and compares with L.
#ifndef MULO_TESTS_ENGINE_DECODE_TABLE_MODEL_H_
#define MULO_TESTS_ENGINE_DECODE_TABLE_MODEL_H_

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/model/token_model.h"
#include "tests/engine/decode/table_law.h"

namespace mulo::engine::testing {

class TableModel : public TokenModel {
 public:
  // Width of hidden states and embeddings (coordinates: 0 a constant 1, 1 the context length,
  // 2 .. 2 + tokens - 1 the context's tokens + 1 newest first, kTokenSlot the fed token + 1).
  static constexpr int64_t kDim = 16;
  static constexpr int64_t kTokenSlot = kDim - 1;

  // `head`: the table HeadLogits reads features against (an EAGLE head's drafts); null: `law`.
  // `unconditional`: the law of the guidance batch's second (null-condition) stream; null:
  // `law` (the condition is ignored).
  explicit TableModel(std::shared_ptr<const TableLaw> law,
                      std::shared_ptr<const TableLaw> head = nullptr,
                      std::shared_ptr<const TableLaw> unconditional = nullptr);

  const TableLaw& law() const { return *law_; }

  std::string architecture() const override { return "table"; }
  int64_t vocab_size() const override { return law_->vocab(); }
  int64_t grid_size() const override { return law_->grid(); }
  int64_t dim() const override { return kDim; }
  const ConditionShape& condition_shape() const override { return condition_shape_; }
  torch::TensorOptions options() const override { return torch::dtype(torch::kFloat32); }
  bool uses_cuda_graphs() const override { return false; }

  KvCache NewCache(int64_t batch, int64_t capacity) const override;
  int64_t CacheRows(int64_t condition_rows) const override;
  StatusOr<torch::Tensor> EmbedCondition(const Condition& condition, bool with_null) const override;
  Status CheckPrefill(const KvCache& cache,
                      const torch::Tensor& condition_embeddings) const override;
  torch::Tensor ConditionPositions(int64_t rows) const override;
  int64_t TokenPosition(int64_t condition_rows, int64_t raster_index) const override;
  StatusOr<torch::Tensor> EmbedTokens(const torch::Tensor& tokens) const override;
  StatusOr<torch::Tensor> EmbedDrawnTokens(const torch::Tensor& tokens) const override;
  StatusOr<ForwardOutput> Forward(KvCache& cache, const torch::Tensor& embeddings,
                                  const torch::Tensor& positions, const torch::Tensor& mask,
                                  LogitsMode logits_mode) const override;
  Status CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                      const torch::Tensor& positions, const torch::Tensor& mask) const override;
  StatusOr<std::vector<ForwardOutput>> ForwardBatch(const std::vector<ForwardCall>& calls,
                                                    PackedGemms gemms) const override;
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions,
                                        LogitsMode logits_mode) const override;
  StatusOr<ForwardOutput> ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                        const torch::Tensor& positions, const torch::Tensor& mask,
                                        LogitsMode logits_mode) const override;
  StatusOr<ForwardOutput> ForwardDrawnTokens(KvCache& cache, const torch::Tensor& tokens,
                                             const torch::Tensor& positions,
                                             LogitsMode logits_mode) const override;
  torch::Tensor HeadLogits(const torch::Tensor& hidden) const override;
  const torch::Tensor& token_embedding_weight() const override { return embedding_; }

  // The feature of a prefix context (what Forward returns as hidden for its last row).
  std::vector<float> Feature(const std::vector<int64_t>& context) const;

 private:
  std::shared_ptr<const TableLaw> law_, head_, unconditional_;
  ConditionShape condition_shape_;
  torch::Tensor embedding_;  // [vocab, kDim]: token + 1 at kTokenSlot
};

// Writes <dir>/config.json and model.safetensors of an EagleHead over a TableModel whose fc
// maps (token embedding, feature of a context) to the feature of the context extended by the
// token, and whose block adds zero: loaded with EagleHead::LoadDirectory against the model.
void WriteLinearEagleHead(const std::string& dir, int64_t tokens);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_TABLE_MODEL_H_
