// LANTERN and LANTERN++: EAGLE's draft trees with relaxed acceptance (tree_verifier.h). A draft
// x is kept with min(1, p~(x) / q(x)), where p~ pools the target probability of x's nearest
// codebook entries in latent space (pooling.h):
//   LANTERN    additive bound delta (the pooled mass c_m <= delta), on EAGLE-2's dynamic tree
//              by default (any EAGLE tree through `tree`);
//   LANTERN++  multiplicative bound (c_m <= (lambda - 1) p(x)), always on EAGLE-1's static tree
//              (its paper's argument: sampled static trees keep deep paths alive).
// delta 0 / lambda 1 / k 0 give EAGLE's tokens exactly (tests/engine/decode/lantern_test.cc).
//
// The papers' k (1000 and 10) were chosen for codebooks of 16384 and 8192 entries; a family
// carries defaults for its own codebook in family.json "method_defaults" ("lantern": {"k",
// "delta"}, "lantern++": {"k", "lambda"}), read through the methods' specs
// (DefaultMethodConfig); the structs below hold the papers' values.
#ifndef MULO_ENGINE_DECODE_LANTERN_H_
#define MULO_ENGINE_DECODE_LANTERN_H_

#include <string>

#include "engine/decode/eagle.h"

namespace mulo::engine {

struct LanternOptions {
  int64_t k = 1000;     // neighbours considered (paper: 1000 of LlamaGen's 16384)
  double delta = 0.1;   // pooled-mass budget (paper: 0.1; MuLo-SD's baseline used 0.4)
  EagleOptions tree;    // the draft tree: EAGLE-2's dynamic 60 / 7 / 10 unless set
};

struct LanternPlusPlusOptions {
  int64_t k = 10;       // neighbours considered (paper: 10 of Lumina-mGPT's 8192)
  double lambda = 2.0;  // relaxation factor (paper: 2 and 3)
  AcceptRule accept;    // empty = AcceptDraft; tests swap in broken rules
};

Status ValidateLanternOptions(const LanternOptions& options);
Status ValidateLanternPlusPlusOptions(const LanternPlusPlusOptions& options);

class LanternDecoder : public EagleDecoder {
 public:
  explicit LanternDecoder(LanternOptions options = LanternOptions());
  std::string name() const override { return "lantern"; }
  Status Validate(const ModelSet& models) const override;

 private:
  LanternOptions lantern_;
};

class LanternPlusPlusDecoder : public EagleDecoder {
 public:
  explicit LanternPlusPlusDecoder(LanternPlusPlusOptions options = LanternPlusPlusOptions());
  std::string name() const override { return "lantern++"; }
  Status Validate(const ModelSet& models) const override;

 private:
  LanternPlusPlusOptions lantern_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_LANTERN_H_
