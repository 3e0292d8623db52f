// MC-SJD, maximal-coupling speculative Jacobi decoding (So et al. 2025, arXiv 2510.24211; v2
// "Speculative Coupled Decoding"): SJD's loop (sjd.h) whose Jacobi update keeps what it can.
// SJD re-draws every draft past the new prefix independently from this iteration's p, so a
// flat image distribution changes almost every draft each iteration and the next verification
// judges tokens whose context just moved. MC-SJD draws each carried draft's successor with the
// maximal coupling of p and the q it was drawn from (maximal_coupling.h): the old token stays
// with probability min(1, p(x) / q(x)), else the residual norm(max(p - q, 0)) is drawn. The
// new draft is still distributed as p, which stays its q, so SJD's acceptance test is exact
// and the method lossless; it equals the old draft with probability 1 - TV(p, q), so drafts
// settle as their contexts do. Positions that had no draft (the bonus row) are drawn from p.
//
// `coupling` is the paper's ablation weight: each carried row is coupled with that
// probability and drawn independently otherwise; 0 is SJD, token for token.
#ifndef MULO_ENGINE_DECODE_MC_SJD_H_
#define MULO_ENGINE_DECODE_MC_SJD_H_

#include <functional>
#include <string>
#include <vector>

#include "engine/decode/sjd.h"

namespace mulo::engine {

struct McSjdOptions {
  int64_t window = 64;  // paper: 64 (Lumina-mGPT's 2304 tokens; its Janus-Pro code 32)
  JacobiInit init = JacobiInit::kRandom;
  double coupling = 1.0;  // paper: 1 (maximal coupling everywhere); 0 = SJD
  AcceptRule accept;  // the verifier's; empty = AcceptDraft; tests swap in broken rules
  // The coupling's probability of keeping each carried draft x from p, q [rows, V] and x
  // [rows]; empty = min(1, p(x) / q(x)) (KeepProbabilities). Tests swap in broken rules.
  std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& q,
                              const torch::Tensor& x)>
      coupled_keep;
  // What a carried draft the coupling did not keep is re-drawn from, given p and q [rows, V];
  // empty = norm(max(p - q, 0)) (ResidualRows). Tests swap in broken rules (p itself).
  std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& q)> coupled_residual;
  // The q a carried draft is judged against after the coupling, given its new p row, its old q
  // and whether the coupling kept it; empty = p (what the new draft is distributed as). Tests
  // swap in Speculative Coupled Decoding's code's rule, the old q for a kept draft.
  std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& old_q, bool kept)>
      carried_q;
};

class McSjdDecoder : public SjdDecoder {
 public:
  explicit McSjdDecoder(McSjdOptions options = McSjdOptions());
  std::string name() const override { return "mc_sjd"; }
  Status Validate(const ModelSet& models) const override;
  torch::Tensor RedrawOnDevice(DecodeSession& session, const torch::Tensor& p, int64_t first,
                               const std::vector<int64_t>& carried,
                               const std::vector<torch::Tensor>& carried_q) const override;
  std::vector<torch::Tensor> NextQ(const torch::Tensor& p, int64_t first,
                                   const std::vector<int64_t>& drafts,
                                   const std::vector<int64_t>& carried,
                                   const std::vector<torch::Tensor>& carried_q) const override;
  // The maximal coupling everywhere (coupling 1) with its own rules: in the coupled graphs.
  std::optional<GraphRules> RulesInGraphs() const override;

 private:
  McSjdOptions mc_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_MC_SJD_H_
