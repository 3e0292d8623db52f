// The maximal coupling of two distributions, row by row: given a token x drawn from q, keep x
// with probability min(1, p(x) / q(x)), otherwise draw from norm(max(p - q, 0)). This is
// speculative decoding's modified rejection sampling (speculative_acceptance.h) applied to
// every row, without its stop at the first rejection. The result is distributed exactly as p,
// and equals x with probability 1 - TV(p, q), the most any coupling of the two allows: a
// position whose distribution barely moved keeps its token (MC-SJD, mc_sjd.h).
#ifndef MULO_ENGINE_SAMPLING_MAXIMAL_COUPLING_H_
#define MULO_ENGINE_SAMPLING_MAXIMAL_COUPLING_H_

#include <torch/types.h>

namespace mulo::engine {

struct CoupledDraws {
  torch::Tensor tokens;  // int64 [rows]: x where kept, else the residual's draw
  torch::Tensor kept;    // bool [rows]
};

// min(1, p_i(x_i) / q_i(x_i)) per row, float64 [rows]: the coupling's (and speculative
// decoding's) probability of keeping x_i, drawn from q_i. p, q [rows, V]; x int64 [rows].
torch::Tensor KeepProbabilities(const torch::Tensor& p, const torch::Tensor& q,
                                const torch::Tensor& x);

// p [rows, V]; x int64 [rows] drawn from q; keep_probability float64 [rows]
// (KeepProbabilities(p, q, x) but in tests); residual [rows, V] (ResidualRows(p, q) but in
// tests); keep_numbers and draw_numbers float64 [rows], uniform in [0, 1). Row i keeps x_i
// when keep_numbers_i < keep_probability_i and otherwise takes the token DrawRows gives for
// residual_i and draw_numbers_i. Rows where `coupled` (bool [rows], undefined = all) is false
// neither keep nor use the residual: they draw from p, independently of x (the partial
// coupling of MC-SJD's ablation). Everything stays on p's device: no host read.
CoupledDraws CoupleRows(const torch::Tensor& p, const torch::Tensor& x,
                        const torch::Tensor& keep_probability, const torch::Tensor& residual,
                        const torch::Tensor& keep_numbers, const torch::Tensor& draw_numbers,
                        const torch::Tensor& coupled = torch::Tensor());

// norm(max(p - q, 0)) per row of p, q [rows, V]; p where p <= q everywhere (then p == q and
// the residual is never drawn from). No host read (unlike ResidualDistribution's fallback).
torch::Tensor ResidualRows(const torch::Tensor& p, const torch::Tensor& q);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_MAXIMAL_COUPLING_H_
