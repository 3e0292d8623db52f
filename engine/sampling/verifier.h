// The verifier role of speculative decoding (vLLM's rejection sampler, the acceptor of the
// papers): given one step's drafts, the distributions they were drawn from and the target's
// distributions at their positions, it decides what is kept and what replaces the rest.
//
// Drafts form a tree through `parents` (a chain is the tree whose draft i has parent i - 1; a
// set of independent positions, as MuLo-SD verifies, has every parent -1), so one interface
// serves every rule of the seed methods. Implemented:
//   ExactVerifier            (exact_verifier.h)   Leviathan et al.: keep x with min(1, p/q),
//                                                 replace the first rejection from
//                                                 norm(max(p - q, 0)), bonus after a full chain
//   PooledThresholdVerifier  (pooled_threshold_verifier.h)  MuLo-SD: keep x where the pooled
//                                                 target mass p~(x) (pooling.h) is >= tau
//   TreeVerifier             (tree_verifier.h)    EAGLE: recursive rejection over siblings,
//                                                 static (q without replacement) or
//                                                 deterministic (q = 1) trees; greedy = the
//                                                 path of argmaxes. With a TreeRelaxation:
//                                                 LANTERN (additive delta) and LANTERN++
//                                                 (multiplicative lambda), keep x with
//                                                 min(1, p~(x) / q(x))
//   GroupVerifier            (group_verifier.h)   GSD: the exact chain rule judging the group
//                                                 G(x) of tokens ranked near x by p (probability
//                                                 gap and embedding-distance bounds): keep with
//                                                 min(1, p(G) / q(G)), reject as exact
#ifndef MULO_ENGINE_SAMPLING_VERIFIER_H_
#define MULO_ENGINE_SAMPLING_VERIFIER_H_

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/core/status.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/uniform_cache.h"

namespace mulo::engine {

class ChainJudge;  // chain_judge.h
class HostReader;  // engine/core/host_read.h

// One step's drafts, as a proposer hands them over.
struct DraftBatch {
  std::vector<int64_t> tokens;   // draft i's token id
  std::vector<int64_t> parents;  // draft i's parent draft; -1 = the committed prefix
  torch::Tensor q;               // [L, V] the distribution draft i was drawn from; undefined
                                 // when drafts are not samples of a known q (MuLo-SD's U_r)

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // A chain of drafts: each the child of the previous one.
  static std::vector<int64_t> ChainParents(int64_t length) {
    std::vector<int64_t> parents(length);
    for (int64_t i = 0; i < length; ++i) parents[i] = i - 1;
    return parents;
  }
};

struct VerifyInput {
  const DraftBatch& drafts;
  // [L or L + 1, V]: row i is the target's distribution at draft i's position (after its
  // ancestors); an extra last row, when present, is the distribution after the whole chain
  // (the bonus position).
  torch::Tensor p;
  bool greedy = false;  // temperature 0: every draw is an argmax and consumes no randomness
};

struct Verdict {
  std::vector<int64_t> accepted;  // kept drafts: a prefix (chain), a root path (tree), any
                                  // subset (independent positions)
  std::vector<int64_t> rejected;  // drafts judged and rejected (rules that judge every draft)
  int64_t next_token = -1;        // drawn after the accepted path (replacement or bonus)
  // Accepted drafts that the exact rule (no relaxation) would not have kept, for the relaxed
  // rules that can tell (pooled threshold: below tau on its own probability): a subset of
  // `accepted`, the same ids.
  std::vector<int64_t> relaxed;
  // Latent relaxations (LANTERN family): drafts whose pooled set was formed, and the
  // neighbours pooled for them, summed (|A| - 1 per draft).
  int64_t pooled_drafts = 0;
  int64_t pooled_neighbors = 0;

  int64_t relaxed_accepts() const { return static_cast<int64_t>(relaxed.size()); }
  // The relaxed drafts' places in `accepted` (their depth - 1 on a chain or a tree path).
  std::vector<int64_t> RelaxedPlaces() const {
    std::vector<int64_t> places;
    for (size_t i = 0; i < accepted.size(); ++i) {
      if (std::find(relaxed.begin(), relaxed.end(), accepted[i]) != relaxed.end()) {
        places.push_back(static_cast<int64_t>(i));
      }
    }
    return places;
  }
};

// The acceptance stream decides keep / reject; the draw stream draws replacements.
struct VerifierRngs {
  Rng* accept = nullptr;
  Rng* draw = nullptr;
  // The same streams' numbers on the device, for verifiers that judge there (optional: without
  // them such a verifier makes the numbers it needs per call, about 200 operators each time).
  UniformCache* accept_numbers = nullptr;
  UniformCache* draw_numbers = nullptr;
  // Where a chain verifier judges on the device (chain_judge.h): the request's engine loop,
  // which batches the judgement with other requests'; null = at once.
  ChainJudge* judge = nullptr;
  // Where a verifier's host reads go (the request's engine loop: one batched read for every
  // waiting request); null = at once.
  HostReader* reader = nullptr;
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual StatusOr<Verdict> Verify(const VerifyInput& input, const VerifierRngs& rngs) const = 0;
};

// Keeps draft x given p(x), q(x) and the acceptance stream (AcceptDraft is the exact rule;
// tests swap in broken rules to show the statistical tests catch them).
using AcceptRule = std::function<bool(double p_x, double q_x, Rng& rng)>;

// The distribution a rejected draft's replacement is drawn from, given the target's p and the
// draft's q rows (ResidualDistribution, norm(max(p - q, 0)), is the exact rule; tests swap in
// broken ones, e.g. p itself, to show the statistical tests catch them).
using ResidualRule = std::function<torch::Tensor(const torch::Tensor& p, const torch::Tensor& q)>;

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_VERIFIER_H_
