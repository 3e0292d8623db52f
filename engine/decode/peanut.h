// PEANUT (Chen et al. 2025): EAGLE-2's dynamic draft trees whose depth and width adapt per
// step to the neighbours' trees (PeanutShapes, peanut_shapes.h). Lossless on its own (the
// tree verifier is EAGLE's); with `lantern_delta` > 0 the acceptance is LANTERN's additive
// latent relaxation (PEANUT + LANTERN, the paper's combination). l_d = l_k = 0 gives EAGLE-2's
// tokens for the same initial shape (tests/engine/decode/peanut_test.cc).
#ifndef MULO_ENGINE_DECODE_PEANUT_H_
#define MULO_ENGINE_DECODE_PEANUT_H_

#include <string>

#include "engine/decode/eagle.h"

namespace mulo::engine {

struct PeanutMethodOptions {
  PeanutOptions shape;      // the paper's beta 1, l_d 1, l_k 3, depth (0, 10), width (3, 14)
  DynamicTreeOptions tree;  // the initial shape: EAGLE-2's 60 / 7 / 10
  double lantern_delta = 0.0;  // 0 = lossless PEANUT; > 0: LANTERN's delta
  int64_t lantern_k = 1000;    // LANTERN's neighbours (the family's LANTERN k when served)
  AcceptRule accept;           // empty = AcceptDraft; tests swap in broken rules
};

// INVALID_ARGUMENT naming "peanut.<field>" when out of range.
Status ValidatePeanutOptions(const PeanutMethodOptions& options);

class PeanutDecoder : public EagleDecoder {
 public:
  explicit PeanutDecoder(PeanutMethodOptions options = PeanutMethodOptions());
  std::string name() const override { return "peanut"; }
  Status Validate(const ModelSet& models) const override;

 private:
  PeanutMethodOptions peanut_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_PEANUT_H_
