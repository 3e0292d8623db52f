// Grouped speculative decoding (So et al. 2025, GSD): SJD's Jacobi loop (sjd.h) whose
// acceptance judges a group of look-alike tokens around each draft instead of the draft alone
// (GroupVerifier, group_verifier.h; the papers' supplement Algorithms 1 and 2). Relaxed, not
// lossless; group_size 1 gives exactly SJD's tokens for the same seed
// (tests/engine/decode/sjd_test.cc).
//
// The paper's embedding bound (0.5, squared L2) is measured in Lumina-mGPT's token
// embeddings; a family states its own in family.json "method_defaults": {"gsd":
// {"max_embedding_distance": ...}} (tools/synth/scale_gsd_defaults.py for the bundled family),
// read through its spec (DefaultMethodConfig); the struct holds the paper's values.
#ifndef MULO_ENGINE_DECODE_GSD_H_
#define MULO_ENGINE_DECODE_GSD_H_

#include <string>

#include "engine/decode/sjd.h"
#include "engine/sampling/group_verifier.h"

namespace mulo::engine {

struct GsdOptions {
  int64_t window = 16;  // paper: 16
  GroupRule group;      // paper: size 14, probability gap 0.15, embedding distance 0.5
  JacobiInit init = JacobiInit::kRandom;
};

Status ValidateGsdOptions(const GsdOptions& options);

class GsdDecoder : public SjdDecoder {
 public:
  explicit GsdDecoder(GsdOptions options = GsdOptions());
  std::string name() const override { return "gsd"; }
  Status Validate(const ModelSet& models) const override;
  // Its groups (in the graphs of their size, if the pools captured it).
  std::optional<GraphRules> RulesInGraphs() const override;

 protected:
  std::unique_ptr<Verifier> MakeVerifier(const ModelSet& models) const override;

 private:
  GsdOptions gsd_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_DECODE_GSD_H_
