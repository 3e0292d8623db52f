// SJD-PAC, speculative Jacobi decoding with proactive drafting and adaptive continuation (Kang
// et al., CVPR 2026, arXiv 2603.18599). Two changes to SJD's loop (sjd.h):
//   - adaptive continuation: the drafts past a rejection are not re-drawn from scratch but
//     kept or replaced one by one against the new distribution (keep x with min(1, p/q), else
//     draw norm(max(p - q, 0))): MC-SJD's maximal coupling (mc_sjd.h), which it inherits;
//   - proactive drafting: the window's first depth - 1 positions branch into a tree. At each,
//     the carried draft is joined by width - 1 more candidates drawn without replacement from
//     the same distribution q (no extra forward), and every node of the level before gets the
//     same candidates as children; the rest of the window hangs as a chain off the carried
//     drafts' path. One tree-masked target forward scores every node and the tree is verified
//     by recursive rejection over siblings (tree_verifier.h), so where the carried draft is
//     rejected a sibling can still be kept.
// Lossless: candidate k at a position is judged as drawn from q with candidates 0..k-1
// removed, which it was, so the kept tokens follow the target exactly; greedy equals AR greedy
// (tests/engine/decode/sjd_pac_test.cc).
//
// With CUDA graphs over the KV-cache pools, an iteration of the family's window, width and
// depth is one replay and one host read (tree_verify_graphs.h, Shape::jacobi): the tree, its
// verification and the next window's drafts and extras inside the graph.
//
// Where this departs from the authors' code, for losslessness: their extra candidates are
// drawn from the residual norm(max(p - q, 0)) but judged as if drawn from q, their verifier
// takes the longest accepted row rather than the first accepted sibling, and a fully accepted
// window's extra token comes from the uniform pad. Here every candidate is judged as what it
// was drawn from, the first accepted sibling is kept, and the token after the path comes from
// the target.
#ifndef MULO_ENGINE_DECODE_SJD_PAC_H_
#define MULO_ENGINE_DECODE_SJD_PAC_H_

#include <string>

#include "engine/decode/mc_sjd.h"
#include "engine/sampling/tree_verifier.h"

namespace mulo::engine {

// Tree nodes a request may ask for below the carried drafts' first position: width + width^2
// + ... + width^(depth - 1).
constexpr int64_t kMaxPacTreeNodes = 256;

struct SjdPacOptions {
  int64_t window = 64;  // paper: 64 (Lumina-mGPT); its ablation's first rows use 32
  JacobiInit init = JacobiInit::kRandom;
  double coupling = 1.0;  // adaptive continuation (paper: on); 0 = SJD's independent re-draw
  int64_t width = 4;      // K, candidates per branching position (paper 4; its code 3); 1 = MC-SJD
  int64_t depth = 3;      // D, tree levels counting the committed root (paper 3); 1 = MC-SJD
  AcceptRule accept;      // the tree verifier's; empty = AcceptDraft; tests swap in broken rules
  TreeRuleHooks hooks;    // the tree verifier's residual and sibling choice (tests)
  // Tests: the distributions the extra candidates are judged as drawn from, given the exact
  // ones ([levels, width - 1, V]: q with the earlier candidates removed) and q itself
  // ([levels, V]); empty = the exact ones.
  std::function<torch::Tensor(const torch::Tensor& exact, const torch::Tensor& q)> sibling_q;
  // The coupling's test hooks (McSjdOptions).
  std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& q)> coupled_residual;
  std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& old_q, bool kept)>
      carried_q;
};

class SjdPacDecoder : public McSjdDecoder {
 public:
  explicit SjdPacDecoder(SjdPacOptions options = SjdPacOptions());
  std::string name() const override { return "sjd_pac"; }
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;

 private:
  SjdPacOptions pac_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_SJD_PAC_H_
