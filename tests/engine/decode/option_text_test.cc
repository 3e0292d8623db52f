// A method's options as text, read and written through its spec (option_text.h): family.json's
// method_defaults, methods_bench's --rows and --mulo_grid, and row labels. Every method's
// options survive a round trip; every key, type and bound is checked naming the field; nested
// options, provenance records and the preset's order behave as documented.
#include "engine/decode/option_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/decode/method_registry.h"

namespace mulo::engine {
namespace {

// An in-bounds value of `o` that differs from `value` (a choice's next name, a boolean's
// other value, a number moved inside its bounds).
double Another(const OptionSpec& o, double value) {
  switch (o.kind) {
    case OptionKind::kChoice: return std::fmod(value + 1, o.choices.size());
    case OptionKind::kBoolean: return o.max == 0 ? 0 : 1 - value;
    case OptionKind::kInteger: return value + 1 <= o.max ? value + 1 : value - 1;
    case OptionKind::kNumber: {
      if (std::isnan(value)) return o.min;
      const double next = value + 0.25;
      return next <= o.max ? next : (value + o.min) / 2;
    }
  }
  return value;
}

TEST(OptionTextTest, EveryOptionOfEveryMethodSurvivesARoundTrip) {
  for (const MethodEntry& method : Methods()) {
    MethodConfig changed;
    for (const OptionSpec& o : method.options) {
      if (o.applies_first) continue;
      o.set(changed, Another(o, o.get(changed)));
    }
    ASSERT_TRUE(CheckOptionBounds(method.name, method.options, changed).ok()) << method.name;
    const nlohmann::json written = OptionsJson(method, changed);
    MethodConfig read;
    Status status = ApplyOptionsJson(method, written, "test", read);
    ASSERT_TRUE(status.ok()) << method.name << ": " << status.message() << " " << written.dump();
    for (const OptionSpec& o : method.options) {
      if (o.applies_first) continue;
      const double a = o.get(read), b = o.get(changed);
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b)))
          << method.name << "." << o.name << ": " << a << " vs " << b;
      if (o.kind != OptionKind::kBoolean || o.max != 0) {
        EXPECT_NE(b, o.get(MethodConfig())) << method.name << "." << o.name << " was not changed";
      }
    }
    EXPECT_EQ(OptionsJson(method, read), written) << method.name;
  }
}

TEST(OptionTextTest, ReadsMulosKeysByNameOverTheBase) {
  const nlohmann::json doc = {{"tau", 1e-3},       {"k", 12},
                              {"delta", 0.2},      {"lambda", 3},
                              {"pooling", "MULTIPLICATIVE"}, {"radius", 0},
                              {"draft_rows", 2},   {"rejection", "raster"},
                              {"draft_prefix", "own"},       {"draft_cfg_scale", 2},
                              {"draft_temperature", 0.5},
                              {"resample", "parallel"},      {"parallel_radius", 2},
                              {"calibration", {{"tool", "calibrate"}, {"speedup", 1.6}}}};
  MethodConfig c;
  ASSERT_TRUE(ApplyOptionsJson(*FindMethod("mulo"), doc, "test", c).ok());
  const MuloOptions& o = c.mulo;
  EXPECT_EQ(o.tau, 1e-3);
  EXPECT_EQ(o.pooling.k, 12);
  EXPECT_EQ(o.pooling.delta, 0.2);
  EXPECT_EQ(o.pooling.lambda, 3);
  EXPECT_EQ(o.pooling.kind, Pooling::kMultiplicative);
  EXPECT_EQ(o.radius, 0);
  EXPECT_EQ(o.draft_rows, 2);
  EXPECT_EQ(o.rejection, Rejection::kRaster);
  EXPECT_EQ(o.prefix, DraftPrefix::kOwn);
  EXPECT_EQ(o.draft_cfg_scale, 2.0);
  EXPECT_EQ(o.draft_temperature, 0.5);
  EXPECT_EQ(o.resample, ResampleOrder::kParallel);
  EXPECT_EQ(o.parallel_radius, 2);
  // Unset keys keep what the config had.
  ASSERT_TRUE(ApplyOptionsJson(*FindMethod("mulo"), {{"radius", 1}}, "test", c).ok());
  EXPECT_EQ(c.mulo.radius, 1);
  EXPECT_EQ(c.mulo.prefix, DraftPrefix::kOwn);
  // The preset applies first whatever the key order: the paper's settings, then tau.
  ASSERT_TRUE(
      ApplyOptionsJson(*FindMethod("mulo"), {{"tau", 0.5}, {"preset", "paper"}}, "test", c).ok());
  EXPECT_EQ(c.mulo.tau, 0.5);
  EXPECT_EQ(c.mulo.radius, PaperMuloOptions().radius);
}

TEST(OptionTextTest, BadKeysTypesAndValuesNameTheField) {
  auto error = [](const std::string& method, const nlohmann::json& doc) {
    MethodConfig c;
    Status s = ApplyOptionsJson(*FindMethod(method), doc, "synth family.json", c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << doc.dump();
    return s.message();
  };
  EXPECT_EQ(error("mulo", {{"taus", 1}}).rfind("synth family.json: field 'taus': not an option "
                                                 "of mulo (preset, tau,", 0),
            0u);
  EXPECT_EQ(error("mulo", {{"tau", -1}}), "synth family.json: field 'tau': must be a finite "
                                          "number >= 0");
  EXPECT_EQ(error("mulo", {{"k", "ten"}}), "synth family.json: field 'k': must be a number");
  EXPECT_EQ(error("mulo", {{"k", 1.5}}), "synth family.json: field 'k': must be >= 0");
  EXPECT_NE(error("mulo", {{"lambda", 0.5}}).find("'lambda'"), std::string::npos);
  EXPECT_EQ(error("mulo", {{"pooling", "sum"}}),
            "synth family.json: field 'pooling': must be one of additive, multiplicative, "
            "no_pooling");
  EXPECT_NE(error("mulo", {{"draft_prefix", "mine"}}).find("'draft_prefix'"), std::string::npos);
  EXPECT_NE(error("mulo", {{"draft_cfg_scale", 101}}).find("'draft_cfg_scale'"),
            std::string::npos);
  EXPECT_EQ(error("eagle", {{"static_tree", 1}}),
            "synth family.json: field 'static_tree': must be true or false");
  EXPECT_EQ(error("mulo", nlohmann::json::array()),
            "synth family.json: field 'mulo': must be an object of options");
  // Nested options are nested objects; their names carry the path.
  EXPECT_EQ(error("lantern", {{"tree", {{"topk", 3}}}}).rfind(
                "synth family.json: field 'tree.topk': not an option of lantern", 0),
            0u);
  EXPECT_EQ(error("lantern", {{"tree", {{"top_k", 0}}}}),
            "synth family.json: field 'tree.top_k': must be in [1, 64]");
  // An object is a provenance record only with a "tool" key.
  EXPECT_NE(error("gsd", {{"scaling", {{"rule", "x"}}}}).find("'scaling'"), std::string::npos);
  EXPECT_EQ(error("peanut", {{"tree", {{"static_tree", true}}}}),
            "synth family.json: field 'tree.static_tree': PEANUT adapts dynamic (EAGLE-2) "
            "trees only");
  MethodConfig c;
  EXPECT_TRUE(ApplyOptionsJson(*FindMethod("lantern"), {{"tree", {{"top_k", 3}}}}, "x", c).ok());
  EXPECT_EQ(c.lantern.tree.dynamic.top_k, 3);
}

TEST(OptionTextTest, AssignmentsSetOptionsByNameWithChoicesAndBooleans) {
  MethodConfig c;
  ASSERT_TRUE(ApplyOptionAssignments(*FindMethod("peanut"),
                                     {"init=random", "tree.depth=4", "beta=0.5"}, "peanut", c)
                  .ok());
  EXPECT_EQ(c.peanut.shape.init, PeanutInit::kRandom);
  EXPECT_EQ(c.peanut.tree.depth, 4);
  EXPECT_EQ(c.peanut.shape.beta, 0.5);
  ASSERT_TRUE(ApplyOptionAssignments(*FindMethod("eagle"), {"static_tree=true"}, "e", c).ok());
  EXPECT_TRUE(c.eagle.static_tree);
  auto error = [&](const std::string& method, const std::string& assignment) {
    return ApplyOptionAssignments(*FindMethod(method), {assignment}, "--rows " + method, c)
        .message();
  };
  EXPECT_EQ(error("sjd", "windows=4").rfind(
                "--rows sjd: field 'windows': not an option of sjd (window, init)", 0),
            0u);
  EXPECT_EQ(error("sjd", "window=four"), "--rows sjd: field 'window': must be a number");
  EXPECT_EQ(error("sjd", "window"), "--rows sjd: field 'window': expected name=value");
  EXPECT_EQ(error("sjd", "window=0"), "--rows sjd: field 'window': must be in [1, 256]");
  EXPECT_EQ(error("eagle", "static_tree=1"),
            "--rows eagle: field 'static_tree': must be true or false");
}

TEST(OptionTextTest, ALabelShowsItsLabelOptionsAndWhatDiffersFromTheDefaults) {
  MethodConfig defaults;
  MethodConfig c = defaults;
  const MethodEntry& lantern = *FindMethod("lantern");
  EXPECT_EQ(OptionsLabel(lantern, c, defaults), "lantern (k 1000, delta 0.1)");
  c.lantern.tree.dynamic.depth = 3;
  EXPECT_EQ(OptionsLabel(lantern, c, defaults), "lantern (k 1000, delta 0.1, tree.depth 3)");
  EXPECT_EQ(OptionsLabel(*FindMethod("ar"), c, defaults), "ar");
  c.mulo.pooling.kind = Pooling::kNone;
  EXPECT_EQ(OptionsLabel(*FindMethod("mulo"), c, defaults), "mulo (pooling no_pooling)");
}

TEST(OptionTextTest, AFamilyServesItsDefaultsAndLoadingChecksThem) {
  ModelSet family;
  family.name = "f";
  auto paper = DefaultMethodConfig("mulo", family);
  ASSERT_TRUE(paper.ok());
  EXPECT_EQ(paper->mulo.radius, PaperMuloOptions().radius);
  family.method_defaults = {{"mulo", {{"draft_prefix", "patch"}, {"tau", 2e-3}}},
                            {"gsd", {{"window", 8}}}};
  auto config = DefaultMethodConfig("mulo", family);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->mulo.prefix, DraftPrefix::kPatch);
  EXPECT_EQ(config->mulo.tau, 2e-3);
  EXPECT_EQ(config->mulo.radius, 3);  // the paper's where the family is silent
  EXPECT_EQ(config->gsd.window, 8);
  EXPECT_TRUE(ValidateMethodDefaults(family).ok());
  family.method_defaults = {{"mulo", {{"radius", -2}}}};
  EXPECT_EQ(ValidateMethodDefaults(family).message(),
            "f family.json method_defaults.mulo: field 'radius': must be >= 0");
  family.method_defaults = {{"mulo_sd", {{"tau", 1}}}};
  Status unknown = ValidateMethodDefaults(family);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown method 'mulo_sd'"), std::string::npos);
}

TEST(OptionTextTest, HelpListsEveryOptionWithItsKindAndBounds) {
  EXPECT_EQ(OptionsHelp(*FindMethod("sjd"), "  "),
            "  window (integer in [1, 256])\n  init (one of random, repeat_horizon)\n");
  EXPECT_EQ(OptionsHelp(*FindMethod("ar"), "  "), "");
}

}  // namespace
}  // namespace mulo::engine
