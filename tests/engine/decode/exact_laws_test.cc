// The exact laws (exact_laws.h) prove the lossless rules by enumeration: every lossless
// configuration's law is ar's to rounding, and every broken rule's law is not.
#include "tests/engine/decode/exact_laws.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "tests/engine/decode/joint_settings.h"
#include "tests/engine/decode/table_family.h"

namespace mulo::engine::testing {
namespace {

double MaxDiff(const Law& a, const Law& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST(ExactLawsTest, LosslessJacobiRulesGiveArsLaw) {
  const TableLaw t = TableLaw::Random(3, 2, 11);
  const Law ar = t.Joint();
  for (int64_t window : {1, 2, 3}) {
    for (bool horizon : {false, true}) {
      JacobiRule sjd;
      sjd.window = window;
      sjd.repeat_horizon = horizon;
      EXPECT_LT(MaxDiff(JacobiLaw(t, sjd), ar), 1e-12) << "sjd window " << window;
      JacobiRule mc = sjd;
      mc.coupling = true;
      EXPECT_LT(MaxDiff(JacobiLaw(t, mc), ar), 1e-12) << "mc_sjd window " << window;
      for (int64_t width : {2, 3}) {
        JacobiRule pac = mc;
        pac.width = width;
        pac.depth = 3;
        EXPECT_LT(MaxDiff(JacobiLaw(t, pac), ar), 1e-12) << "sjd_pac window " << window;
      }
    }
  }
}

TEST(ExactLawsTest, LosslessSpeculativeAndZipArGiveArsLaw) {
  const TableLaw t = TableLaw::Random(3, 2, 12), q = TableLaw::Random(3, 2, 13);
  const Law ar = t.Joint();
  for (int64_t gamma : {1, 2, 3, 5}) {
    EXPECT_LT(MaxDiff(SpeculativeLaw(t, q, gamma), ar), 1e-12) << "gamma " << gamma;
  }
  EXPECT_LT(MaxDiff(ZipArLaw(t, 2), ar), 1e-15);
  const TableLaw nine = TableLaw::Random(2, 3, 14);
  EXPECT_LT(MaxDiff(ZipArLaw(nine, 3), nine.Joint()), 1e-15);
  EXPECT_GT(TotalVariation(ZipArLaw(nine, 1), nine.Joint()), 0.01);
}

TEST(ExactLawsTest, LosslessTreesGiveArsLaw) {
  const TableLaw t = TableLaw::Random(3, 2, 12), head = TableLaw::Random(3, 2, 15);
  const Law ar = t.Joint();
  TreeRule eagle1;
  eagle1.static_tree = true;
  EXPECT_LT(MaxDiff(EagleLaw(t, head, eagle1), ar), 1e-12);
  for (int64_t top_k : {1, 2, 3}) {
    TreeRule eagle2;
    eagle2.total_tokens = 6;
    eagle2.depth = 2;
    eagle2.top_k = top_k;
    EXPECT_LT(MaxDiff(EagleLaw(t, head, eagle2), ar), 1e-12) << "top_k " << top_k;
    TreeRule lantern = eagle2;  // delta 0 pools nothing
    lantern.relaxation = 1;
    lantern.k = 2;
    EXPECT_LT(MaxDiff(EagleLaw(t, head, lantern), ar), 1e-12);
    lantern.delta = 0.2;
    EXPECT_GT(TotalVariation(EagleLaw(t, head, lantern), ar), 1e-3);
  }
  TreeRule plus = eagle1;  // lambda 1 pools nothing
  plus.relaxation = 2;
  plus.k = 2;
  EXPECT_LT(MaxDiff(EagleLaw(t, head, plus), ar), 1e-12);
  plus.lambda = 3;
  EXPECT_GT(TotalVariation(EagleLaw(t, head, plus), ar), 1e-3);
}

TEST(ExactLawsTest, EveryControlMovesTheHardTablesLaw) {
  // The controls of exact_joint_test on its table: each broken rule's law is at least 0.01 of
  // noncentrality per image from ar's (the hill-climb's floor was 0.052 when it was written).
  const JointTables tables = LoadHardTables();
  const Law ar = tables.target.Joint();
  for (const Control& c : JointControls()) {
    const Law law = c.law(tables);
    const double d = Noncentrality(law, ar);
    std::cout << "[law] " << c.name << ": noncentrality per image " << d << ", TV "
              << TotalVariation(law, ar) << "\n";
    EXPECT_GT(d, 0.01) << c.name;
  }
}

TEST(ExactLawsTest, TheSameRulesAreInvisibleOnARandomTable) {
  // Why the table is searched: on a random table (seed 11) SJD-PAC's longest-path and old-q
  // rules leave ar's law exactly as it is at window 3 with random initial drafts (every
  // draft they touch has a one-hot q, which is a valid proposal whatever drew it), and
  // MC-SJD's old-q rule moves it by 3e-4 per image.
  const TableLaw t = TableLaw::Random(3, 2, 11);
  const Law ar = t.Joint();
  JacobiRule pac;
  pac.window = 3;
  pac.coupling = true;
  pac.width = 3;
  pac.depth = 3;
  pac.broken.longest_path = true;
  EXPECT_LT(Noncentrality(JacobiLaw(t, pac), ar), 1e-20);
  pac.broken = {};
  pac.broken.old_q_for_kept = true;
  EXPECT_LT(Noncentrality(JacobiLaw(t, pac), ar), 1e-20);
  JacobiRule mc;
  mc.window = 3;
  mc.coupling = true;
  mc.broken.old_q_for_kept = true;
  EXPECT_LT(Noncentrality(JacobiLaw(t, mc), ar), 1e-3);
}

TEST(ExactLawsTest, PowerGrowsWithRunsAndMatchesThePooledNoncentrality) {
  const TableLaw t = TableLaw::Random(3, 2, 11);
  const Law ar = t.Joint();
  JacobiRule sjd;
  sjd.window = 3;
  sjd.broken.residual_from_p = true;
  const Law broken = JacobiLaw(t, sjd);
  const Power p = RunsForPower(broken, ar, 0.999, 40000);
  ASSERT_LE(p.runs, 40000);
  EXPECT_GE(p.probability, 0.999);
  const Power less = RunsForPower(broken, ar, 0.5, 40000);
  EXPECT_LT(less.runs, p.runs);
  // Without pooling (all cells large) the noncentrality is runs x the per-image one.
  EXPECT_NEAR(PooledAt(broken, ar, int64_t{1} << 50).lambda / std::pow(2.0, 50),
              Noncentrality(broken, ar), 1e-9);
  // No effect: the exceed probability is the false alarm, 0.001.
  EXPECT_NEAR(ExceedProbability(40, 0.0, ChiSquareCritical999(40)), 0.001, 2e-4);
}

}  // namespace
}  // namespace mulo::engine::testing
