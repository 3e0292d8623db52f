// Drawing a node's children of a static draft tree (EAGLE-1, LANTERN++): `count` distinct
// tokens from q without replacement. Draw i comes from q with draws 0..i-1 removed and
// renormalised (q_i(t) = q(t) / (1 - sum of the earlier picks)); that q_i is what the tree
// verifier needs to stay lossless. Greedy: the `count` most likely tokens, q_i one-hot.
#ifndef MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_
#define MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/sampling/rng.h"

namespace mulo::engine {

struct SiblingDraws {
  std::vector<int64_t> tokens;  // distinct, in draw order
  torch::Tensor q;              // [tokens, V]: row i the distribution draw i came from
};

// q: [V] probabilities. Draws at most the number of tokens with q > 0 (fewer when q has
// fewer), each from the remaining mass.
SiblingDraws DrawWithoutReplacement(const torch::Tensor& q, int64_t count, Rng& rng, bool greedy);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_
