// Draws tokens for many rows at once on the rows' device, with no host read: the tokens stay
// where the logits are and can be fed to the next forward as they are. The uniforms come from
// the counter-based generator (philox.h), so the draws do not depend on the device or on the
// order in which rows are drawn.
#ifndef MULO_ENGINE_SAMPLING_ROW_SAMPLER_H_
#define MULO_ENGINE_SAMPLING_ROW_SAMPLER_H_

#include <torch/types.h>

#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// Inverse-CDF draw of one token per row: probs [rows, vocab] (need not be normalised) at
// uniforms [rows] (float64 in [0, 1)) -> int64 [rows]. The row's cumulative sum runs in double;
// the chosen token is the first whose cumulative mass exceeds u * total, so an entry without
// mass is never chosen, and rounding past the top gives the row's last entry with mass: the
// same decisions as SampleFromHostProbabilities given the same uniform.
torch::Tensor DrawRows(const torch::Tensor& probs, const torch::Tensor& uniforms);

// Every row's top-k and top-p filters (ToProbabilities') as tensors, so that one CUDA graph
// serves any mix of requests: top_k int64 and top_p float32, both broadcastable to the
// logits' [..., 1]. top_k 0 (or at least the vocabulary) and top_p 1 keep every token.
struct RowFilters {
  torch::Tensor top_k, top_p;
};

// Whether `params` filter a vocabulary of `vocab` tokens (what RowFilters then carry).
bool HasFilters(const SamplingParams& params, int64_t vocab);

// Tempered logits [..., vocab] float32 with each row's filtered tokens at -inf, bit for bit
// ToProbabilities' filtering of that row with its own top_k and top_p (a row that filters
// nothing comes back unchanged). Graph-capturable.
torch::Tensor FilterRows(const torch::Tensor& tempered, const RowFilters& filters);

// Tokens of CFG-mixed logits [rows, vocab]: the argmax of each row at temperature 0 (the
// uniforms are not read), otherwise DrawRows(ToProbabilities(logits, params), uniforms).
// p as DecodeSession::Probabilities makes it, for requests whose cfg_scale and temperature are
// tensors (graph-capturable: one graph serves any mix of requests): the guided logits uncond +
// cfg (cond - uncond), tempered and softmaxed; at temperature 0 the one-hot row of their argmax
// (the first on ties), or with `one_hot_greedy` false their untempered softmax (the ranking
// distribution a relaxed greedy rule pools over). cond and uncond [..., vocab] float32; cfg and
// temperature float32, broadcastable to [..., 1]. `filters` (null: none) filter the tempered
// logits of sampled rows as ToProbabilities does (a greedy row's argmax is never filtered).
torch::Tensor GuidedProbabilities(const torch::Tensor& cond, const torch::Tensor& uncond,
                                  const torch::Tensor& cfg, const torch::Tensor& temperature,
                                  bool one_hot_greedy = true,
                                  const RowFilters* filters = nullptr);

torch::Tensor SampleRows(const torch::Tensor& logits, const SamplingParams& params,
                         const torch::Tensor& uniforms);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_ROW_SAMPLER_H_
