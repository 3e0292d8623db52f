// SynthEval on mismatched pairs: each held-out scene (rendered at 64 px) against its five
// captions that each contradict one attribute. Almost all must fail, and on the contradicted
// attribute.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "synth/synth_eval.h"
#include "tests/synth/test_util.h"

namespace mulo::synth {
namespace {

// The verdict field judging each mismatched attribute (keys of HeldoutEntry::mismatched).
bool AttributeFailed(const Verdict& v, const std::string& attribute) {
  if (attribute == "color") return !v.color;
  if (attribute == "shape") return !v.shape;
  if (attribute == "size") return !v.size;
  if (attribute == "position") return !v.position;
  if (attribute == "background") return !v.background;
  ADD_FAILURE() << "unknown attribute " << attribute;
  return false;
}

struct MismatchRates {
  double overall = 0.0;                        // fraction of mismatched captions failing
  std::map<std::string, double> on_attribute;  // attribute -> fraction failing on it
};

MismatchRates EvaluateMismatches(int size) {
  const auto entries = testing::LoadHeldout();
  EXPECT_EQ(entries.size(), 512u);
  const SynthEval eval;
  int total = 0, failed = 0;
  std::map<std::string, int> count, attribute_failed, any_failed;
  std::map<std::string, testing::Tally> tallies;
  int printed = 0;
  for (const auto& entry : entries) {
    const cv::Mat image = testing::RenderOrDie(entry.scene, size);
    EXPECT_EQ(entry.mismatched.size(), 5u) << "entry " << entry.id;
    for (const auto& [attribute, caption] : entry.mismatched) {
      auto verdict = eval.Evaluate(caption, image);
      EXPECT_TRUE(verdict.ok()) << verdict.status();
      if (!verdict.ok()) continue;
      ++total;
      failed += !verdict->pass;
      ++count[attribute];
      any_failed[attribute] += !verdict->pass;
      tallies[attribute].Add(*verdict);
      const bool hit = AttributeFailed(*verdict, attribute);
      attribute_failed[attribute] += hit;
      if (!hit && printed++ < 20) {
        std::cout << "  [" << size << " px] #" << entry.id << " " << attribute
                  << " mismatch not caught: \"" << caption << "\"\n  (true: \"" << entry.prompt
                  << "\")\n  " << verdict->ToString() << "\n";
      }
    }
  }
  MismatchRates rates;
  rates.overall = total == 0 ? 0.0 : static_cast<double>(failed) / total;
  std::cout << size << " px mismatched captions failing overall: " << failed << "/" << total << " ("
            << 100.0 * rates.overall << "%)\n";
  for (const auto& [attribute, n] : count) {
    std::cout << "  " << attribute << " mismatches: " << attribute_failed[attribute] << "/" << n
              << " fail on " << attribute << ", " << any_failed[attribute]
              << " fail overall; per-attribute failures:";
    for (const auto& [a, k] : tallies[attribute].failed) std::cout << " " << a << "=" << k;
    std::cout << "\n";
    rates.on_attribute[attribute] = static_cast<double>(attribute_failed[attribute]) / n;
  }
  return rates;
}

TEST(SynthEvalMismatchTest, MismatchesFailOnTheMismatchedAttributeAt64Pixels) {
  const MismatchRates rates = EvaluateMismatches(64);
  EXPECT_GE(rates.overall, 0.95);
  ASSERT_EQ(rates.on_attribute.size(), 5u);
  for (const auto& [attribute, rate] : rates.on_attribute) EXPECT_GE(rate, 0.90) << attribute;
}

// At 32 px some small shapes render to the same pixels (a small circle and a small square
// can both be a 5 x 5 block with or without corners), so a shape swap there is undetectable
// and the claim gets the benefit of the doubt. Measured: 99.2% fail overall, shape swaps
// caught 95.9%, every other attribute 100%; the bounds are those at 64 px.
TEST(SynthEvalMismatchTest, MismatchesFailOnTheMismatchedAttributeAt32Pixels) {
  const MismatchRates rates = EvaluateMismatches(32);
  EXPECT_GE(rates.overall, 0.95);
  ASSERT_EQ(rates.on_attribute.size(), 5u);
  for (const auto& [attribute, rate] : rates.on_attribute) EXPECT_GE(rate, 0.90) << attribute;
}

}  // namespace
}  // namespace mulo::synth
