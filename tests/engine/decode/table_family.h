// A model family made of TableModels (table_model.h), on which every method runs, and the
// test that compares a method's sampled images with an exact law over every image (issue 58).
//
// The family: the target reads `target`; the chain draft model (speculative) reads `chain`;
// the EAGLE head is a real EagleHead whose features HeadLogits reads against `head`; the
// latent neighbour table (LANTERN's pooling, GSD's embedding distances) comes from a codebook
// in which token t sits at t on a line, so its neighbours are the adjacent ids.
#ifndef MULO_TESTS_ENGINE_DECODE_TABLE_FAMILY_H_
#define MULO_TESTS_ENGINE_DECODE_TABLE_FAMILY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/decode/decoding_method.h"
#include "engine/model/model_set.h"
#include "tests/engine/decode/exact_laws.h"
#include "tests/engine/decode/joint_settings.h"
#include "tests/engine/decode/table_law.h"
#include "tests/engine/decode/table_model.h"

namespace mulo::engine::testing {

struct TableFamily {
  // `target` is the law the target's guided distribution follows at cfg `cfg`: its model reads
  // TableLaw::ConditionalFor(target, unconditional, cfg) and `unconditional` in its two
  // guidance streams (cfg 1: the target table in both).
  std::shared_ptr<const TableLaw> target, chain, head, unconditional;
  double cfg = 1.0;
  ModelSet models;
  Condition condition;  // class_label 0: the models ignore it
};

// The family over these laws (same vocabulary and grid); the EAGLE head is written under
// TempPath(name). With cfg != 1 the target's two streams read a conditional and a random
// unconditional table whose guidance at cfg is `target`.
TableFamily MakeTableFamily(const std::string& name, TableLaw target, TableLaw chain, TableLaw head,
                            double cfg = 1.0);

TableFamily MakeTableFamily(const std::string& name, const JointTables& tables, double cfg = 1.0);

// MuLo-SD's components for a family whose grid is `factor` x `factor`: a 1 x 1 drafter
// reading `drafter` and random-weight up- and down-samplers over a codebook of the target's
// vocabulary (written under TempPath(name)); U_r is then a fixed map from the drafter's token
// to a whole image of drafts, MuloUpsampled.
void AddMuloComponents(TableFamily* family, const std::string& name, TableLaw drafter,
                       uint64_t seed);
// U_r's drafts (raster order) for every drafter token.
std::vector<std::vector<int64_t>> MuloUpsampled(const TableFamily& family);

// The hill-climbed tables of tests/data/table_laws/hard.json (table_search.cc).
JointTables LoadHardTables();

// Sampling at temperature 1 (guidance `cfg`, which the table models ignore) and `seed`.
SamplingParams TableSampling(uint64_t seed, double cfg = 1.0);

// Decodes one image.
StatusOr<DecodeResult> Decode(const DecodingMethod& method, const TableFamily& family,
                              const SamplingParams& sampling);

// Pearson's statistic of `counts` against `law` (probabilities summing to 1) over `runs`
// images; cells expected below 5 are pooled into one cell. df = cells - 1.
struct JointCheck {
  double statistic = 0;
  int df = 0;
  double critical = 0;  // the 99.9% quantile of chi-square with df degrees of freedom
  int64_t runs = 0;
  bool passes() const { return statistic < critical; }
};
JointCheck PearsonJoint(const std::vector<int64_t>& counts, const std::vector<double>& law,
                        int64_t runs);

// Decodes `runs` images with seeds seed0, seed0 + 1, ... at temperature 1 and the family's
// cfg, and counts each image; a decode error fails the calling test (ADD_FAILURE) and stops
// the sampling.
std::vector<int64_t> SampleImages(const DecodingMethod& method, const TableFamily& family,
                                  int64_t runs, uint64_t seed0 = 1000000);

// SampleImages + PearsonJoint against `law`, printed as one line "[joint] label: ...".
JointCheck CheckJoint(const std::string& label, const DecodingMethod& method,
                      const TableFamily& family, const std::vector<double>& law, int64_t runs);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_TABLE_FAMILY_H_
