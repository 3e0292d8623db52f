// Feeding image tokens to a model at their raster positions, shared by the speculative
// methods (draft rows, verification chunks, re-sampling refreshes).
#ifndef MULO_ENGINE_DECODE_FEED_TOKENS_H_
#define MULO_ENGINE_DECODE_FEED_TOKENS_H_

#include <cstdint>
#include <vector>

#include "engine/model/transformer.h"

namespace mulo::engine {

// Appends tokens[from, to) (raster indices) to `cache` at their raster positions, the same
// ids in every stream of the batch, and returns the logits ([batch, n or 1, V]).
StatusOr<torch::Tensor> FeedTokens(const Transformer& model, KvCache& cache,
                                   const std::vector<int64_t>& tokens, int64_t from, int64_t to,
                                   LogitsMode mode);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_FEED_TOKENS_H_
