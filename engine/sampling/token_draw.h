// Tokens drawn from a request's guided logits on their device, one request at a time or many
// requests' draws as one batched draw (what the engine loop runs, engine_loop.h): the draw of
// a batch gives every request exactly the tokens it draws alone, because each row is mixed,
// tempered, filtered and drawn by row-wise operations only, with the request's own numbers.
#ifndef MULO_ENGINE_SAMPLING_TOKEN_DRAW_H_
#define MULO_ENGINE_SAMPLING_TOKEN_DRAW_H_

#include <torch/types.h>

#include <vector>

#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// One request's draw of k tokens.
struct DrawCall {
  // [streams, k, V] or [streams, V] (k = 1): the guidance streams' logits (conditional first).
  torch::Tensor logits;
  // float64 [k] on the logits' device: position j's number; undefined when greedy.
  torch::Tensor uniforms;
  SamplingParams sampling;

  // k: the tokens drawn.
  int64_t count() const { return logits.dim() == 3 ? logits.size(1) : 1; }
};

// The k tokens, int64 [k] on the logits' device: CFG-mixed, then SampleRows.
torch::Tensor DrawTokens(const DrawCall& call);

// Stateless; the engine loop batches the calls made of one drawer (its own), and a drawer's
// batch holds the draws of every request waiting to draw.
class TokenDrawer {
 public:
  // The tokens of each call, each equal to DrawTokens(call). Calls that share their sampling
  // parameters, stream count, vocabulary, dtype and device are drawn as one batch of rows.
  std::vector<torch::Tensor> DrawBatch(const std::vector<DrawCall>& calls) const;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_TOKEN_DRAW_H_
