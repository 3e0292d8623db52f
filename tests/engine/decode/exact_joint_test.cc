// Proofs that can fail (issue 58): every method decodes the enumerable table family
// (table_model.h) and its images are tested against an exact law over every image (Pearson
// at 99.9%, cells expected below 5 pooled): ar's law for the lossless methods, the relaxed
// law for GSD, LANTERN, LANTERN++ and ZipAR (exact_laws.h). Each broken rule (a hook in the
// rule, not a copy of the method) runs the same test and must fail.
//
// The table is the hill-climbed tests/data/table_laws/hard.json, and every test's size comes
// from a power calculation on the exact laws: a method's test decodes as many images as its
// hardest control needs to fail with probability 0.999 (the false alarm of a correct method is
// 0.001 by the critical value). docs/testing.md has the power table these tests print.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>

#include "engine/decode/ar.h"
#include "engine/decode/eagle.h"
#include "engine/decode/gsd.h"
#include "engine/decode/lantern.h"
#include "engine/decode/mc_sjd.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/mulo.h"
#include "engine/decode/peanut.h"
#include "engine/decode/sjd.h"
#include "engine/decode/sjd_pac.h"
#include "engine/decode/speculative.h"
#include "engine/decode/zipar.h"
#include "tests/engine/decode/exact_laws.h"
#include "tests/engine/decode/joint_settings.h"
#include "tests/engine/decode/table_family.h"
#include "tests/engine/test_util.h"

namespace mulo::engine::testing {
namespace {

constexpr double kPower = 0.999;
constexpr int64_t kMaxRuns = 40000;
// Images for a test with no control of its own (ar; auto's choices, proven by their own tests).
constexpr int64_t kPlainRuns = 3000;

const JointTables& Tables() {
  static const JointTables* tables = new JointTables(LoadHardTables());
  return *tables;
}

// Guidance at 2: the target's streams read a conditional and an unconditional table whose
// guided mix is the hard table, so every method's guidance path is in the law it must follow.
constexpr double kCfg = 2.0;

const TableFamily& Family() {
  static const TableFamily* family =
      new TableFamily(MakeTableFamily("exact_joint", Tables(), kCfg));
  return *family;
}

const Law& ArLaw() {
  static const Law* law = new Law(Tables().target.Joint());
  return *law;
}

// The exact law of the control named `name` (joint_settings.h).
Law ControlLaw(const std::string& name) {
  for (const Control& c : JointControls()) {
    if (c.name == name) return c.law(Tables());
  }
  ADD_FAILURE() << "no control " << name;
  return ArLaw();
}

// The images a test of `exact` needs for `broken` to fail with probability kPower.
int64_t RunsToCatch(const Law& broken, const Law& exact, const std::string& label) {
  const Power p = RunsForPower(broken, exact, kPower, kMaxRuns);
  std::cout << "[power] " << label << ": " << p.runs << " images, noncentrality " << p.lambda
            << " df " << p.df << " critical " << p.critical << ", fails with probability "
            << p.probability << std::endl;
  EXPECT_LE(p.runs, kMaxRuns) << label << " is too close to the exact law to be caught";
  return std::min(p.runs, kMaxRuns);
}

// The most images any of `controls` needs.
int64_t RunsToCatchAll(const std::vector<std::string>& controls) {
  int64_t runs = 100;
  for (const std::string& c : controls)
    runs = std::max(runs, RunsToCatch(ControlLaw(c), ArLaw(), c));
  return runs;
}

void ExpectFollows(const std::string& label, const DecodingMethod& method,
                   const TableFamily& family, const Law& law, int64_t runs) {
  const JointCheck check = CheckJoint(label, method, family, law, runs);
  EXPECT_LT(check.statistic, check.critical) << label << " does not follow its law";
}

void ExpectCaught(const std::string& label, const DecodingMethod& method, const TableFamily& family,
                  const Law& exact, int64_t runs) {
  const JointCheck check = CheckJoint("control " + label, method, family, exact, runs);
  EXPECT_GT(check.statistic, check.critical) << label << " was not caught";
}

torch::Tensor FromP(const torch::Tensor& p, const torch::Tensor&) { return p; }

// ---------------------------------------------------------------------------------------------

TEST(ExactJointTest, Ar) { ExpectFollows("ar", ArDecoder(), Family(), ArLaw(), kPlainRuns); }

SpeculativeOptions Speculative() {
  SpeculativeOptions o;
  o.gamma = kSpeculativeGamma;
  return o;
}

TEST(ExactJointTest, Speculative) {
  const int64_t runs = RunsToCatchAll({"speculative, residual replaced by p"});
  ExpectFollows("speculative", SpeculativeDecoder(Speculative()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, SpeculativeResidualFromPIsCaught) {
  const std::string name = "speculative, residual replaced by p";
  SpeculativeOptions broken = Speculative();
  broken.residual = FromP;
  ExpectCaught(name, SpeculativeDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

EagleOptions Eagle1() {
  EagleOptions o;
  o.static_tree = true;
  return o;
}

EagleOptions Eagle2() {
  EagleOptions o;
  o.dynamic = {kEagle2Tokens, kEagle2Depth, kEagle2TopK};
  return o;
}

TEST(ExactJointTest, EagleStaticTree) {
  const int64_t runs = RunsToCatchAll({"eagle (EAGLE-1), residual replaced by p"});
  ExpectFollows("eagle (EAGLE-1)", EagleDecoder(Eagle1()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, EagleDynamicTree) {
  const int64_t runs = RunsToCatchAll(
      {"eagle (EAGLE-2), residual replaced by p", "eagle (EAGLE-2), longest kept path"});
  ExpectFollows("eagle (EAGLE-2)", EagleDecoder(Eagle2()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, EagleResidualFromPIsCaught) {
  for (bool dynamic : {false, true}) {
    const std::string name = dynamic ? "eagle (EAGLE-2), residual replaced by p"
                                     : "eagle (EAGLE-1), residual replaced by p";
    EagleOptions broken = dynamic ? Eagle2() : Eagle1();
    broken.hooks.residual = FromP;
    ExpectCaught(name, EagleDecoder(broken), Family(), ArLaw(),
                 RunsToCatch(ControlLaw(name), ArLaw(), name));
  }
}

TEST(ExactJointTest, EagleLongestPathIsCaught) {
  const std::string name = "eagle (EAGLE-2), longest kept path";
  EagleOptions broken = Eagle2();
  broken.hooks.keep_longest_path = true;
  ExpectCaught(name, EagleDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

TEST(ExactJointTest, Peanut) {
  // PEANUT's trees are EAGLE-2's with a shape per step; its verifier is EAGLE's, so its test
  // is sized by EAGLE-2's controls.
  PeanutMethodOptions o;
  o.tree = {kEagle2Tokens, kEagle2Depth, kEagle2TopK};
  o.shape.min_top_k = 1;
  o.shape.max_top_k = 3;
  o.shape.min_depth = 0;
  o.shape.max_depth = 3;
  const int64_t runs = RunsToCatchAll(
      {"eagle (EAGLE-2), residual replaced by p", "eagle (EAGLE-2), longest kept path"});
  ExpectFollows("peanut", PeanutDecoder(o), Family(), ArLaw(), runs);
}

SjdOptions Sjd() {
  SjdOptions o;
  o.window = kSjdWindow;
  return o;
}

TEST(ExactJointTest, Sjd) {
  const int64_t runs = RunsToCatchAll({"sjd, rejection re-drawn from p"});
  ExpectFollows("sjd", SjdDecoder(Sjd()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, SjdResidualFromPIsCaught) {
  const std::string name = "sjd, rejection re-drawn from p";
  SjdOptions broken = Sjd();
  broken.residual = FromP;
  ExpectCaught(name, SjdDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

McSjdOptions McSjd() {
  McSjdOptions o;
  o.window = kMcSjdWindow;
  o.init = JacobiInit::kRepeatHorizon;
  return o;
}

torch::Tensor OldQForKept(const torch::Tensor& p, const torch::Tensor& old_q, bool kept) {
  return kept ? old_q : p;
}

TEST(ExactJointTest, McSjd) {
  const int64_t runs =
      RunsToCatchAll({"mc_sjd, SCD's q rule (old q kept)", "mc_sjd, moved draft re-drawn from p"});
  ExpectFollows("mc_sjd", McSjdDecoder(McSjd()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, McSjdOldQIsCaught) {
  const std::string name = "mc_sjd, SCD's q rule (old q kept)";
  McSjdOptions broken = McSjd();
  broken.carried_q = OldQForKept;
  ExpectCaught(name, McSjdDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

TEST(ExactJointTest, McSjdMovedDraftFromPIsCaught) {
  const std::string name = "mc_sjd, moved draft re-drawn from p";
  McSjdOptions broken = McSjd();
  broken.coupled_residual = FromP;
  ExpectCaught(name, McSjdDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

SjdPacOptions SjdPac() {
  SjdPacOptions o;
  o.window = kPacWindow;
  o.width = kPacWidth;
  o.depth = kPacDepth;
  o.init = JacobiInit::kRepeatHorizon;
  return o;
}

TEST(ExactJointTest, SjdPac) {
  const int64_t runs = RunsToCatchAll({"sjd_pac, SCD's q rule (old q kept)",
                                       "sjd_pac, siblings judged without the removals",
                                       "sjd_pac, longest kept path"});
  ExpectFollows("sjd_pac", SjdPacDecoder(SjdPac()), Family(), ArLaw(), runs);
}

TEST(ExactJointTest, SjdPacOldQIsCaught) {
  const std::string name = "sjd_pac, SCD's q rule (old q kept)";
  SjdPacOptions broken = SjdPac();
  broken.carried_q = OldQForKept;
  ExpectCaught(name, SjdPacDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

TEST(ExactJointTest, SjdPacSiblingsWithoutRemovalsAreCaught) {
  const std::string name = "sjd_pac, siblings judged without the removals";
  SjdPacOptions broken = SjdPac();
  broken.sibling_q = [](const torch::Tensor& exact, const torch::Tensor& q) {
    return q.unsqueeze(1).expand_as(exact).contiguous();
  };
  ExpectCaught(name, SjdPacDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

TEST(ExactJointTest, SjdPacLongestPathIsCaught) {
  const std::string name = "sjd_pac, longest kept path";
  SjdPacOptions broken = SjdPac();
  broken.hooks.keep_longest_path = true;
  ExpectCaught(name, SjdPacDecoder(broken), Family(), ArLaw(),
               RunsToCatch(ControlLaw(name), ArLaw(), name));
}

// ---------------------------------------------------------------------------------------------
// Relaxed methods: their images follow their own relaxed law, which the same test tells from
// ar's (the relaxation is visible at these sizes: the runs are those that reject ar's law for
// the relaxed method's images with probability 0.999).

// GSD's groups: a draft is judged with the tokens within one rank of it that are also its
// neighbours in the table model's embedding (squared distance 1 < 1.5) and within 0.3 of its
// probability.
constexpr int64_t kGsdGroup = 3;
constexpr double kGsdGap = 0.3, kGsdDistance = 1.5;

TEST(ExactJointTest, GsdFollowsItsGroupedLaw) {
  JacobiRule rule = SjdRule();
  rule.group_size = kGsdGroup;
  rule.max_probability_gap = kGsdGap;
  rule.max_embedding_distance = kGsdDistance;
  const Law gsd_law = JacobiLaw(Tables().target, rule);
  const int64_t runs = RunsToCatch(ArLaw(), gsd_law, "gsd's images tested against ar's law");
  GsdOptions o;
  o.window = kSjdWindow;
  o.group = GroupRule{kGsdGroup, kGsdGap, kGsdDistance};
  const GsdDecoder gsd(o);
  ExpectFollows("gsd (its grouped law)", gsd, Family(), gsd_law, runs);
  ExpectCaught("gsd against ar's law", gsd, Family(), ArLaw(), runs);
}

// LANTERN's pooled acceptance on EAGLE-2's tree: a draft borrows its neighbours' mass up to
// delta (both neighbours of a 3-token line).
constexpr int64_t kLanternK = 2;
constexpr double kLanternDelta = 0.2, kLanternLambda = 2.0;

TEST(ExactJointTest, LanternFollowsItsRelaxedLaw) {
  TreeRule rule = Eagle2Rule();
  rule.relaxation = 1;
  rule.k = kLanternK;
  rule.delta = kLanternDelta;
  const Law lantern_law = EagleLaw(Tables().target, Tables().head, rule);
  const int64_t runs =
      RunsToCatch(ArLaw(), lantern_law, "lantern's images tested against ar's law");
  LanternOptions o;
  o.k = kLanternK;
  o.delta = kLanternDelta;
  o.tree = Eagle2();
  const LanternDecoder lantern(o);
  ExpectFollows("lantern (its relaxed law)", lantern, Family(), lantern_law, runs);
  ExpectCaught("lantern against ar's law", lantern, Family(), ArLaw(), runs);
}

TEST(ExactJointTest, LanternPlusPlusFollowsItsRelaxedLaw) {
  TreeRule rule = Eagle1Rule();
  rule.relaxation = 2;
  rule.k = kLanternK;
  rule.lambda = kLanternLambda;
  const Law plus_law = EagleLaw(Tables().target, Tables().head, rule);
  const int64_t runs = RunsToCatch(ArLaw(), plus_law, "lantern++'s images tested against ar's law");
  LanternPlusPlusOptions o;
  o.k = kLanternK;
  o.lambda = kLanternLambda;
  const LanternPlusPlusDecoder plus(o);
  ExpectFollows("lantern++ (its relaxed law)", plus, Family(), plus_law, runs);
  ExpectCaught("lantern++ against ar's law", plus, Family(), ArLaw(), runs);
}

// ZipAR: on 2 x 2 every window is plain AR (row 1 opens when row 0 is complete); on 3 x 3
// (2 tokens, so that the 512 images stay countable) window 1 reads two tokens from contexts
// that are not prefixes (its relaxation). A wrong wavefront, where a token sees the row above
// only up to its own column, is caught on both.
ZipArRows::Visibility OwnColumnOnly(int64_t grid) {
  return [grid](int64_t own, int64_t seen) {
    return !(seen / grid == own / grid - 1 && seen % grid > own % grid);
  };
}

TEST(ExactJointTest, ZipArIsArOnTwoRows) {
  // Unguided: a wrong wavefront reads the partial law, which guidance would mix with the
  // unconditional stream's.
  const TableFamily family = MakeTableFamily("exact_joint_zipar", Tables());
  ZipArOptions o;
  o.window = 1;
  const std::string name = "zipar, a wavefront that sees the row above up to its column";
  const Law broken = ZipArLaw(Tables().target, 1, OwnColumnOnly(kJointGrid));
  const int64_t runs = RunsToCatch(broken, ArLaw(), name);
  ExpectFollows("zipar (window 1 on 2 x 2 = ar)", ZipArDecoder(o), family, ArLaw(), runs);
  o.visible = OwnColumnOnly(kJointGrid);
  ExpectCaught(name, ZipArDecoder(o), family, ArLaw(), runs);
}

TEST(ExactJointTest, ZipArFollowsItsWavefrontLaw) {
  const TableLaw nine = TableLaw::Random(2, 3, 58);
  const TableFamily family = MakeTableFamily("zipar_nine", nine, nine, nine);
  const std::string name = "zipar 3 x 3, a wavefront that sees the row above up to its column";
  for (int64_t window : {1, 2}) {
    const Law law = ZipArLaw(nine, window);
    const int64_t runs =
        std::max(RunsToCatch(nine.Joint(), law, "zipar's images tested against ar's law"),
                 RunsToCatch(ZipArLaw(nine, window, OwnColumnOnly(3)), law, name));
    ZipArOptions o;
    o.window = window;
    const std::string label = "zipar window " + std::to_string(window) + " on 3 x 3";
    ExpectFollows(label + " (its wavefront law)", ZipArDecoder(o), family, law, runs);
    ExpectCaught(label + " against ar's law", ZipArDecoder(o), family, nine.Joint(), runs);
    o.visible = OwnColumnOnly(3);
    ExpectCaught(name, ZipArDecoder(o), family, law, runs);
  }
}

// MuLo-SD on 2 x 2 with a 1 x 1 drafter: one step drafts the whole image (U_2 of one drafter
// token), verifies it by the pooled threshold and re-samples the expanded rejections, so its
// law is a sum over the drafter's token (MuloLaw). Multi-step MuLo-SD (D_r's prefix, more
// drafter rows) needs a 4 x 4 grid, too many images to count; mulo_test covers those steps.
struct MuloCase {
  std::string label;
  MuloOptions options;
  MuloRule rule;
};

// Local expansion with sequential and with parallel re-sampling, and raster rejection, at tau.
std::vector<MuloCase> MuloCases(double tau) {
  MuloOptions o;
  o.tau = tau;
  o.pooling = PoolingRule{Pooling::kAdditive, 1, 0.1};
  o.radius = 0;
  o.resample = ResampleOrder::kSequential;
  MuloRule r;
  r.tau = tau;
  r.k = 1;
  r.delta = 0.1;
  const std::string at = "mulo (tau " + std::to_string(tau).substr(0, 4);
  MuloCase sequential{at + ", local, sequential)", o, r};
  MuloCase parallel = sequential;
  parallel.label = at + ", local, parallel radius 0)";
  parallel.options.resample = ResampleOrder::kParallel;
  parallel.options.parallel_radius = 0;
  parallel.rule.parallel = true;
  parallel.rule.parallel_radius = 0;
  MuloCase raster = sequential;
  raster.label = at + ", raster rejection)";
  raster.options.rejection = Rejection::kRaster;
  raster.rule.raster_rejection = true;
  return {sequential, parallel, raster};
}

TEST(ExactJointTest, MuloFollowsItsPooledThresholdLaw) {
  TableFamily family = MakeTableFamily("exact_joint_mulo", Tables(), kCfg);
  // The first random up-sampler (from seed 59 on) whose three drafts differ everywhere.
  std::vector<std::vector<int64_t>> up;
  for (uint64_t seed = 59;; ++seed) {
    AddMuloComponents(&family, "exact_joint_mulo", TableLaw::Random(kJointVocab, 1, 59), seed);
    up = MuloUpsampled(family);
    bool distinct = true;
    for (int64_t i = 0; i < 4; ++i) {
      distinct = distinct && up[0][i] != up[1][i] && up[1][i] != up[2][i] && up[0][i] != up[2][i];
    }
    if (distinct || seed > 200) break;
  }
  for (size_t d = 0; d < up.size(); ++d) {
    std::cout << "[mulo] U_2(" << d << ") =";
    for (int64_t t : up[d]) std::cout << " " << t;
    std::cout << "\n";
  }
  const std::vector<double> drafter =
      family.models.drafter == nullptr
          ? std::vector<double>()
          : static_cast<const TableModel&>(*family.models.drafter).law().Next({});
  // The first tau (in tenths) at which the three rules' laws differ from each other and from
  // ar's, so that each case is sized to tell its law from the others' (a wrong expansion or
  // re-sampling order is a different law).
  std::vector<MuloCase> cases;
  std::vector<Law> laws;
  for (double tau = 0.1; tau < 0.95 && laws.empty(); tau += 0.1) {
    cases = MuloCases(tau);
    for (const MuloCase& c : cases) laws.push_back(MuloLaw(Tables().target, drafter, up, c.rule));
    for (size_t i = 0; i < laws.size() && !laws.empty(); ++i) {
      bool apart = TotalVariation(laws[i], ArLaw()) > 0.01;
      for (size_t j = 0; j < i; ++j) apart = apart && TotalVariation(laws[i], laws[j]) > 0.01;
      if (!apart) laws.clear();
    }
  }
  ASSERT_FALSE(laws.empty()) << "no tau separates MuLo-SD's rules on this table";
  for (size_t i = 0; i < cases.size(); ++i) {
    const MuloCase& c = cases[i];
    int64_t runs = RunsToCatch(ArLaw(), laws[i], c.label + "'s images tested against ar's law");
    for (size_t j = 0; j < cases.size(); ++j) {
      if (j == i) continue;
      runs = std::max(runs, RunsToCatch(laws[j], laws[i], c.label + " against " + cases[j].label));
    }
    const MuloDecoder mulo(c.options);
    ExpectFollows(c.label + " (its law)", mulo, family, laws[i], runs);
    ExpectCaught(c.label + " against ar's law", mulo, family, ArLaw(), runs);
    for (size_t j = 0; j < cases.size(); ++j) {
      if (j != i) ExpectCaught(c.label + " against " + cases[j].label, mulo, family, laws[j], runs);
    }
  }
  // tau > 1 rejects every draft: every position is re-sampled in raster order, ar's law.
  MuloOptions all = cases[0].options;
  all.tau = 1.5;
  ExpectFollows("mulo (tau 1.5 = ar)", MuloDecoder(all), family, ArLaw(), kPlainRuns);
}

// ---------------------------------------------------------------------------------------------
// `auto`: with a calibration that makes each lossless method the fastest, auto runs it (at
// the family's defaults, the papers' values here) and its images follow ar's law.

TEST(ExactJointTest, AutosLosslessChoicesFollowArsLaw) {
  TableFamily family = MakeTableFamily("exact_joint_auto", Tables(), kCfg);
  for (const std::string& fastest :
       {"speculative", "eagle", "peanut", "sjd", "mc_sjd", "sjd_pac"}) {
    family.models.method_defaults = {
        {"auto",
         {{"calibration",
           {{"tool", "exact_joint_test"},
            {"cpu",
             {{"methods",
               {{fastest, {{"speedup", 3.0}, {"syntheval_delta", -1.0}}},
                {"lantern", {{"speedup", 5.0}, {"syntheval_delta", -20.0}}}}}}}}}}}};
    MethodConfig config;
    config.name = "auto";
    auto method = MakeMethod(config, family.models);
    ASSERT_OK(method);
    EXPECT_EQ((*method)->name(), fastest) << "auto must pass over the faster relaxed lantern";
    ExpectFollows("auto -> " + fastest, **method, family, ArLaw(), kPlainRuns / 2);
  }
}

}  // namespace
}  // namespace mulo::engine::testing
