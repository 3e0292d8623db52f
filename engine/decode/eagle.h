// EAGLE-1 (static tree) and EAGLE-2 (dynamic tree) with the family's EAGLE-style head: each
// step the head grows a draft tree after the committed prefix (EagleProposer), one target
// forward scores the last committed token and every node under the tree mask (positions =
// depth), TreeVerifier keeps a root-to-node path by recursive rejection over siblings and
// draws the next token from the last residual, and the target's cache keeps exactly that
// path. Lossless: greedy equals AR greedy, sampled tokens follow AR's distribution
// (tests/engine/decode/eagle_test.cc).
#ifndef MULO_ENGINE_DECODE_EAGLE_H_
#define MULO_ENGINE_DECODE_EAGLE_H_

#include <string>

#include <optional>

#include "engine/decode/dynamic_tree.h"
#include "engine/decode/peanut_shapes.h"
#include "engine/decode/session.h"
#include "engine/sampling/pooling.h"
#include "engine/sampling/tree_verifier.h"
#include "engine/sampling/verifier.h"

namespace mulo::engine {

struct EagleOptions {
  bool static_tree = false;     // true: EAGLE-1's static 58-node tree; false: EAGLE-2
  DynamicTreeOptions dynamic;   // EAGLE-2: total_tokens 60, depth 7, top_k 10
  AcceptRule accept;            // empty = AcceptDraft (min(1, p/q)); tests swap in broken rules
  TreeRuleHooks hooks;          // the exact residual and sibling choice; tests swap in broken ones
  // LANTERN's latent relaxation of the acceptance test (tree_verifier.h); kNone = EAGLE.
  PoolingRule relaxation{Pooling::kNone};
  // PEANUT's policy choosing each step's dynamic tree depth and width from the neighbours'
  // trees (peanut_shapes.h), `dynamic` being the initial shape; unset = EAGLE-2's fixed shape.
  std::optional<PeanutOptions> peanut;
};

// INVALID_ARGUMENT naming "<prefix>.total_tokens" / ".depth" / ".top_k" when out of range
// ([1, 256], [1, 32], [1, 64]).
Status ValidateEagleOptions(const EagleOptions& options, const std::string& prefix = "eagle");

class EagleDecoder : public SteppedMethod {
 public:
  explicit EagleDecoder(EagleOptions options = EagleOptions()) : options_(std::move(options)) {}
  std::string name() const override { return "eagle"; }
  Status Validate(const ModelSet& models) const override;

 protected:
  StatusOr<std::unique_ptr<State>> Begin(DecodeSession& session) const override;

 private:
  EagleOptions options_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_EAGLE_H_
