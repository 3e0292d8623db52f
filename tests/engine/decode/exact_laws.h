// Exact laws of whole images for methods decoding a TableLaw (issue 58), written from each
// method's rule (its paper and docs/methods.md), not from the engine's code: every random
// choice a method makes (initial drafts, drafter draws, acceptance tests, residual and bonus
// draws, Jacobi re-draws, couplings, sibling draws) is enumerated with its probability, and the
// images reached are summed. The methods' tests compare sampled images with these laws:
//   - a lossless rule's law is ar's (TableLaw::Joint), which the tests check first, so the
//     enumeration is proven on the lossless rules before it stands for a relaxed one;
//   - a relaxed rule's law (GSD's groups, LANTERN's pooled acceptance, ZipAR's wavefront) is
//     the one its images must follow;
//   - a broken rule's law (the controls) tells how far it is from ar's, which sizes the tests
//     (ExpectedNoncentrality, the power table in docs/testing.md) and is what the hill-climb
//     that makes a table hard maximises (table_search.cc).
#ifndef MULO_TESTS_ENGINE_DECODE_EXACT_LAWS_H_
#define MULO_TESTS_ENGINE_DECODE_EXACT_LAWS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "tests/engine/decode/table_law.h"

namespace mulo::engine::testing {

// Probabilities over every image, indexed by TableLaw::ImageIndex.
using Law = std::vector<double>;

// Which broken rule replaces an exact one (each is one of the controls that must fail).
struct BrokenRules {
  bool residual_from_p = false;           // a rejection is replaced from p, not the residual
  bool coupled_residual_from_p = false;   // MC-SJD's coupling re-draws a moved draft from p
  bool old_q_for_kept = false;            // a draft the coupling kept keeps its old q (SCD's code)
  bool siblings_without_removal = false;  // SJD-PAC judges extra candidates as drawn from q
  bool longest_path = false;              // a tree keeps its longest kept path, not the first
};

// SJD and its descendants on the target `t`: a window of `window` drafts after the committed
// prefix, initialised uniformly (or, with repeat_horizon, with the token one row up), verified
// left to right (or as SJD-PAC's tree), then re-drawn from this iteration's p (SJD) or coupled
// with it (MC-SJD, SJD-PAC).
struct JacobiRule {
  int64_t window = 3;
  bool repeat_horizon = false;
  bool coupling = false;  // MC-SJD's maximal coupling of the carried drafts
  int64_t width = 1;      // SJD-PAC: candidates per branching position (1: a chain)
  int64_t depth = 1;      // SJD-PAC: tree levels counting the root (1: a chain)
  // GSD: a draft x is kept with min(1, p(G) / q(G)), G(x) the tokens within group_size ranks
  // of x in p (size / 2 below, the rest above), within max_probability_gap of p(x) and at
  // squared embedding distance below max_embedding_distance (the table model embeds token t at
  // t + 1 on one axis); group_size 1 = SJD.
  int64_t group_size = 1;
  double max_probability_gap = 0.0;
  double max_embedding_distance = 0.0;
  BrokenRules broken;
};
Law JacobiLaw(const TableLaw& t, const JacobiRule& rule);

// Speculative decoding with the chain draft model `q`: gamma drafts per step (fewer near the
// image's end), verified left to right, a residual on the first rejection, a bonus after a full
// chain when a position follows.
Law SpeculativeLaw(const TableLaw& t, const TableLaw& q, int64_t gamma,
                   const BrokenRules& broken = {});

// EAGLE-1 / EAGLE-2 and the LANTERN family with the EAGLE head's table `head`: each step a
// draft tree after the committed prefix (EAGLE-1: StaticTree57 cut at the image's end, each
// node's children drawn without replacement from the head's q; EAGLE-2: the dynamic tree the
// head's q ranks, deterministic drafts), verified by recursive rejection over siblings with
// LANTERN's pooled acceptance when `relaxation` is set.
struct TreeRule {
  bool static_tree = false;
  int64_t total_tokens = 60, depth = 7, top_k = 10;  // EAGLE-2's dynamic tree
  // 0: none (EAGLE); 1: additive, c_m <= delta (LANTERN); 2: multiplicative, c_m <=
  // (lambda - 1) p(x) (LANTERN++); over the first k latent neighbours.
  int relaxation = 0;
  int64_t k = 0;
  double delta = 0, lambda = 1;
  BrokenRules broken;
};
Law EagleLaw(const TableLaw& t, const TableLaw& head, const TreeRule& rule);

// MuLo-SD's one step on a grid its drafter covers in one row (drafter 1 x 1, target r x r):
// the drafter draws d from `drafter`; U_r's drafts are upsampled[d] (all r x r positions, in
// raster order, the up-sampler being a fixed function of d); position i is kept when its
// pooled target probability p~_i(x_i) >= tau (additive pooling over its first k latent
// neighbours within delta, p_i after the drafts before it); rejections grow into their
// neighbourhoods N(t, radius) (or everything from the first, raster); the re-sampled
// positions are drawn in raster order from the target given the sequence as it stands, or,
// parallel, from the verify pass where no earlier re-sampled position lies within
// parallel_radius.
struct MuloRule {
  double tau = 1e-4;
  int64_t k = 0;
  double delta = 0;
  int64_t radius = 0;
  bool raster_rejection = false;
  bool parallel = false;
  int64_t parallel_radius = 1;
};
Law MuloLaw(const TableLaw& t, const std::vector<double>& drafter,
            const std::vector<std::vector<int64_t>>& upsampled, const MuloRule& rule);

// ZipAR with `window` on t's grid: every token is drawn from t.Given(its position, what the
// forward that predicts it sees), as docs/methods.md and zipar_rows.h describe the wavefront:
// row 0 is plain AR; row r + 1 opens when row r has `window` tokens (row 1 when row 0 is
// complete), its first token predicted by a placeholder at row r's last position that carries
// the newest token of row r - 1; a token fed at (r, c) sees its own row, all of row 0 and
// min(W, k window + c + 1) tokens of row r - k >= 1.
// `visible` (a broken wavefront, as ZipArOptions::visible): whether the token fed at raster
// `own` may see the earlier token at `seen`; empty = always.
Law ZipArLaw(const TableLaw& t, int64_t window,
             const std::function<bool(int64_t own, int64_t seen)>& visible = {});

// Pearson's noncentrality per image of a law `broken` against `exact`: sum (b - e)^2 / e. A
// test of n images then has noncentrality n times this (before cells are pooled).
double Noncentrality(const Law& broken, const Law& exact);
// Total variation distance.
double TotalVariation(const Law& a, const Law& b);

// Pearson's noncentrality of `runs` images of `broken` tested against `exact` with the cells
// pooled as PearsonJoint pools them (expected count below 5), and the test's degrees of
// freedom.
struct PooledNoncentrality {
  double lambda = 0;
  int df = 0;
};
PooledNoncentrality PooledAt(const Law& broken, const Law& exact, int64_t runs);

// The fewest runs (a multiple of 100, at most max_runs) at which a Pearson test of `broken`
// against `exact` at the 99.9% critical value fails with probability >= `power`; max_runs + 1
// when even max_runs is not enough.
struct Power {
  int64_t runs = 0;
  int df = 0;
  double lambda = 0, critical = 0, probability = 0;
};
Power RunsForPower(const Law& broken, const Law& exact, double power, int64_t max_runs);

// 99.9% quantile of chi-square with df degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical999(int df);

// The chance that Pearson's statistic with df degrees of freedom and noncentrality lambda
// exceeds `critical` (Patnaik's approximation: a scaled chi-square with the same two moments).
double ExceedProbability(int df, double lambda, double critical);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_EXACT_LAWS_H_
