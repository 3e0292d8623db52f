// Speculative Jacobi decoding (Teng et al. 2024, SJD): parallel decoding with no draft model.
// A window of `window` draft tokens sits past the committed prefix. Each iteration:
//   1. the window is filled: the drafts carried from the last iteration first, then new
//      tokens (RANDOM: uniform, with a one-hot q; REPEAT_HORIZON: the token one row up);
//   2. one target forward scores the last committed token and the whole window under the
//      causal mask, giving p at every window position (and the bonus position after it);
//   3. left to right, draft x_i is kept with min(1, p_i(x_i) / q_i(x_i)), q_i being the
//      distribution it was drawn from (the previous iteration's p at its position); the first
//      rejection is replaced from norm(max(p_i - q_i, 0)) (ExactVerifier); a fully kept window
//      draws the bonus token from p after it;
//   4. Jacobi update: every position after the new committed prefix is re-drawn from this
//      iteration's p there (Redraw; MC-SJD couples the re-draw with the carried draft), which
//      becomes its q; the target's cache rolls back past the last committed token.
// Lossless: q is the distribution each draft was actually drawn from, so the kept tokens
// follow the target's p exactly; greedy equals AR greedy (tests/engine/decode/sjd_test.cc).
// With CUDA graphs over the KV-cache pools, an iteration of the default window is one replay
// and one host read (verify_graphs.h, Shape::redraw): steps 2-4 inside the graph.
// GSD (gsd.h) is this loop with a grouped acceptance test (in the graphs too, for its default
// group size).
#ifndef MULO_ENGINE_DECODE_SJD_H_
#define MULO_ENGINE_DECODE_SJD_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/decode/jacobi_window.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/session.h"
#include "engine/sampling/group_verifier.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

// Draft positions per Jacobi iteration a request may ask for (SJD, GSD, MC-SJD, SJD-PAC).
constexpr int64_t kMaxJacobiWindow = 256;

struct SjdOptions {
  // Draft positions per iteration (paper: 16); the default is what the pools' graphs hold
  // (kv_pools.h: another window verifies without them).
  int64_t window = KvPools::kGraphedWindow;
  JacobiInit init = JacobiInit::kRandom;
  AcceptRule accept;      // empty = AcceptDraft; tests swap in broken rules
  ResidualRule residual;  // empty = norm(max(p - q, 0)); tests swap in broken rules
};

// INVALID_ARGUMENT naming "<method>.window" when outside [1, 256].
Status ValidateJacobiWindow(int64_t window, const std::string& method);

class SjdDecoder : public SteppedMethod {
 public:
  explicit SjdDecoder(SjdOptions options = SjdOptions()) : options_(std::move(options)) {}
  std::string name() const override { return "sjd"; }
  Status Validate(const ModelSet& models) const override;

  // Step 4's drafts for rows [first, p.size(0)) of this iteration's p (row i: position n + i),
  // int64 on p's device (empty when there are no such rows). `carried` holds the previous
  // drafts at rows [first, first + carried.size()) and `carried_q` the distributions they were
  // drawn from. SJD draws every row afresh from p (its argmax when greedy) with the drafter
  // stream's next numbers; MC-SJD couples the carried drafts with p (mc_sjd.h). Each row's
  // draft is distributed as p.
  virtual torch::Tensor RedrawOnDevice(DecodeSession& session, const torch::Tensor& p,
                                       int64_t first, const std::vector<int64_t>& carried,
                                       const std::vector<torch::Tensor>& carried_q) const;
  // RedrawOnDevice read to the host (one read, DecodeSession::ReadIds).
  StatusOr<std::vector<int64_t>> Redraw(DecodeSession& session, const torch::Tensor& p, int64_t first,
                              const std::vector<int64_t>& carried,
                              const std::vector<torch::Tensor>& carried_q) const;
  // The distributions the re-drawn drafts `drafts` (rows [first, p.size(0)) of p, as Redraw's
  // arguments) are judged against next time: the rows of p they are distributed as. MC-SJD's
  // tests swap in other rules.
  virtual std::vector<torch::Tensor> NextQ(const torch::Tensor& p, int64_t first,
                                           const std::vector<int64_t>& drafts,
                                           const std::vector<int64_t>& carried,
                                           const std::vector<torch::Tensor>& carried_q) const;
  // What the pools' verify graphs (verify_graphs.h) do for this method's iteration, or none
  // when they cannot hold its rules (another method's, a test's broken rule): they judge the
  // window by GSD's groups when `groups`, and re-draw it by MC-SJD's coupling when `couple`.
  struct GraphRules {
    std::optional<GroupRule> groups;
    bool couple = false;
  };
  virtual std::optional<GraphRules> RulesInGraphs() const;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;
  // The acceptance test of the window (exact for SJD; grouped for GSD).
  virtual std::unique_ptr<Verifier> MakeVerifier(const ModelSet& models) const;
  const SjdOptions& options() const { return options_; }

 private:
  SjdOptions options_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_SJD_H_
