// `method: auto` (auto_method.h): the fastest method of the family's calibration table for
// this device that the budget allows. Without a budget it never picks a relaxed method,
// whatever the table says (checked over random tables); a budget admits relaxed methods
// within their measured loss; `relaxed` admits any; a method the family cannot run is never
// chosen; no table means ar, said so; a malformed table fails the family at load.
#include "engine/decode/auto_method.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "engine/decode/method_registry.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

ModelSet Tiny() {
  auto family = LoadModelSet("tests/data/repository/tiny", LoadOptions());
  EXPECT_TRUE(family.ok()) << family.status().ToString();
  return family.ok() ? std::move(family).value() : ModelSet();
}

nlohmann::json Row(double speedup, double delta) {
  return {{"speedup", speedup}, {"syntheval_delta", delta}, {"syntheval_delta_se", 6.0}};
}

// A family whose cpu table holds `methods`.
void SetTable(ModelSet& family, const nlohmann::json& methods) {
  family.method_defaults["auto"] = {
      {"calibration", {{"tool", "test"}, {"cpu", {{"methods", methods}}}}}};
}

StatusOr<AutoChoice> Choose(const ModelSet& family, const AutoOptions& options = AutoOptions()) {
  auto defaults = DefaultMethodConfig("ar", family);
  if (!defaults.ok()) return defaults.status();
  return ChooseAutoMethod(options, family, *defaults);
}

TEST(AutoMethodTest, PicksTheFastestAllowedMethodOfTheTable) {
  ModelSet family = Tiny();
  SetTable(family, {{"ar", Row(1.0, 0)},
                    {"zipar", Row(3.0, -2.0)},
                    {"mulo", Row(2.5, -10.0)},
                    {"mc_sjd", Row(1.8, 1.0)},
                    {"sjd", Row(1.6, 3.0)},
                    {"speculative", Row(0.5, 0.0)}});
  auto lossless = Choose(family);
  ASSERT_OK(lossless);
  EXPECT_EQ(lossless->method, "mc_sjd");
  EXPECT_EQ(lossless->reason,
            "auto: mc_sjd, the fastest lossless method of tiny's cpu calibration (1.80x ar)");
  AutoOptions budget;
  budget.max_quality_loss = 5.0;  // zipar loses 2 points: allowed; mulo's 10 are not
  EXPECT_EQ(Choose(family, budget)->method, "zipar");
  budget.max_quality_loss = 1.0;
  EXPECT_EQ(Choose(family, budget)->method, "mc_sjd");
  AutoOptions relaxed;
  relaxed.relaxed = true;
  EXPECT_EQ(Choose(family, relaxed)->method, "zipar");
  // Nothing faster than ar: ar.
  SetTable(family, {{"sjd", Row(0.9, 0)}, {"zipar", Row(2.0, -1)}});
  EXPECT_EQ(Choose(family)->method, "ar");
}

TEST(AutoMethodTest, NeverPicksARelaxedMethodWithoutABudget) {
  ModelSet family = Tiny();
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> speed(0.2, 4.0), delta(-30, 10);
  int relaxed_fastest = 0;
  for (int trial = 0; trial < 200; ++trial) {
    nlohmann::json table = nlohmann::json::object();
    std::string fastest;
    double best = 0;
    for (const std::string& name : AvailableMethods(family)) {
      const double s = speed(rng);
      table[name] = Row(s, delta(rng));
      if (s > best && name != "auto") best = s, fastest = name;
    }
    SetTable(family, table);
    auto choice = Choose(family);
    ASSERT_OK(choice);
    const MethodEntry& chosen = *FindMethod(choice->method);
    EXPECT_TRUE(chosen.lossless && chosen.lossless(*DefaultMethodConfig("ar", family)))
        << choice->method << " in " << table.dump();
    relaxed_fastest += !FindMethod(fastest)->lossless;
  }
  EXPECT_GT(relaxed_fastest, 50);  // the tables often tempt it
}

TEST(AutoMethodTest, LosslessIsTheSpecsSayAtTheFamilysDefaults) {
  ModelSet family = Tiny();
  SetTable(family, {{"peanut", Row(3.0, 0)}, {"sjd", Row(1.5, 0)}});
  EXPECT_EQ(Choose(family)->method, "peanut");  // lantern_delta 0: lossless PEANUT
  family.method_defaults["peanut"] = {{"lantern_delta", 0.2}};
  EXPECT_EQ(Choose(family)->method, "sjd");  // PEANUT + LANTERN is relaxed
}

TEST(AutoMethodTest, AMethodTheFamilyCannotRunIsNeverChosen) {
  ModelSet family = Tiny();
  family.eagle = nullptr;
  SetTable(family, {{"eagle", Row(5.0, 0)}, {"sjd", Row(1.5, 0)}, {"beam", Row(9.0, 0)}});
  EXPECT_EQ(Choose(family)->method, "sjd");
}

TEST(AutoMethodTest, WithoutATableForTheDeviceItRunsArAndSaysSo) {
  ModelSet family = Tiny();
  auto none = Choose(family);
  ASSERT_OK(none);
  EXPECT_EQ(none->method, "ar");
  EXPECT_EQ(none->reason, "auto: tiny's family.json has no cpu calibration "
                          "(tools/synth/calibrate_auto.py): ran ar");
  family.method_defaults["auto"] = {{"calibration", {{"tool", "t"}, {"cuda", nlohmann::json{
                                        {"methods", {{"sjd", Row(2, 0)}}}}}}}};
  EXPECT_EQ(Choose(family)->method, "ar");  // only a cuda table: not for this cpu family
}

TEST(AutoMethodTest, MakeMethodRunsTheChoiceAndAMalformedTableFailsTheFamily) {
  ModelSet family = Tiny();
  SetTable(family, {{"sjd", Row(1.5, 0)}});
  MethodConfig config;
  config.name = "auto";
  auto resolved = ResolveMethod(config, family);
  ASSERT_OK(resolved);
  EXPECT_EQ(resolved->name, "sjd");
  EXPECT_NE(resolved->chosen_by.find("sjd, the fastest lossless"), std::string::npos);
  auto method = MakeMethod(config, family);
  ASSERT_OK(method);
  EXPECT_EQ((*method)->name(), "sjd");
  EXPECT_TRUE(ValidateMethodDefaults(family).ok());
  config.automatic.max_quality_loss = -1;
  EXPECT_EQ(ResolveMethod(config, family).status().message().rfind("auto.max_quality_loss:", 0),
            0u);
  SetTable(family, {{"sjd", {{"speedup", "fast"}}}});
  Status bad = ValidateMethodDefaults(family);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("method_defaults.auto.calibration.cpu.methods.sjd.speedup: must "
                               "be a number"),
            std::string::npos)
      << bad.message();
}

}  // namespace
}  // namespace mulo::engine
