// Drawing a node's children of a static draft tree (EAGLE-1, LANTERN++): `count` distinct
// tokens from q without replacement. Draw i comes from q with draws 0..i-1 removed and
// renormalised (q_i(t) = q(t) / (1 - sum of the earlier picks)); that q_i is what the tree
// verifier needs to stay lossless. Greedy: the `count` most likely tokens, q_i one-hot.
#ifndef MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_
#define MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_

#include <torch/types.h>

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

// The same draws for many nodes at once, where q is, with no host read (a static tree's
// proposer reads its whole tree once). q: [P, V], one parent per row; `uniforms`: float64
// [P, count], row p's numbers in draw order (undefined when greedy). Draw r of row p is what
// DrawWithoutReplacement's r-th draw gives with those numbers; where q's row has fewer than
// `count` tokens with mass, the draws past them are marked invalid (token and row arbitrary).
struct SiblingDrawsOnDevice {
  torch::Tensor tokens;  // int64 [P, count]
  torch::Tensor q;       // float32 [P, count, V]: the distribution each draw came from
  torch::Tensor valid;   // bool [P, count]
};
SiblingDrawsOnDevice DrawSiblingsOnDevice(const torch::Tensor& q, int64_t count,
                                          const torch::Tensor& uniforms, bool greedy);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_WITHOUT_REPLACEMENT_H_
