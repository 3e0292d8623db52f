// MuLo-SD's options as a family declares them (family.json "method_defaults"): parsed over the
// paper's settings, every key and range checked with the field named, written back losslessly,
// and checked once when a family loads (ValidateMethodDefaults).
#include "engine/decode/mulo_options.h"

#include <gtest/gtest.h>

#include "engine/decode/method_registry.h"

namespace mulo::engine {
namespace {

TEST(MuloOptionsTest, TheStructDefaultsAreThePapersSettings) {
  const MuloOptions paper = PaperMuloOptions();
  EXPECT_EQ(paper.tau, 1e-4);
  EXPECT_EQ(paper.pooling.kind, Pooling::kAdditive);
  EXPECT_EQ(paper.pooling.k, 1000);
  EXPECT_EQ(paper.pooling.delta, 0.1);
  EXPECT_EQ(paper.radius, 3);
  EXPECT_EQ(paper.draft_rows, 1);
  EXPECT_EQ(paper.rejection, Rejection::kLocal);
  EXPECT_EQ(paper.prefix, DraftPrefix::kDownsampled);
  EXPECT_EQ(paper.resample, ResampleOrder::kSequential);
  EXPECT_FALSE(paper.draft_cfg_scale.has_value());
  EXPECT_FALSE(paper.draft_temperature.has_value());
}

TEST(MuloOptionsTest, ParsesEveryKeyOverTheBaseAndWritesItBack) {
  const nlohmann::json doc = {{"tau", 1e-3},       {"k", 12},
                              {"delta", 0.2},      {"lambda", 3},
                              {"pooling", "multiplicative"}, {"radius", 0},
                              {"draft_rows", 2},   {"rejection", "raster"},
                              {"draft_prefix", "own"},       {"draft_cfg_scale", 2},
                              {"draft_temperature", 0.5},
                              {"resample", "parallel"},      {"parallel_radius", 2},
                              {"calibration", {{"speedup", 1.6}}}};
  auto o = ParseMuloOptions(doc, PaperMuloOptions(), "test");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->tau, 1e-3);
  EXPECT_EQ(o->pooling.k, 12);
  EXPECT_EQ(o->pooling.delta, 0.2);
  EXPECT_EQ(o->pooling.lambda, 3);
  EXPECT_EQ(o->pooling.kind, Pooling::kMultiplicative);
  EXPECT_EQ(o->radius, 0);
  EXPECT_EQ(o->draft_rows, 2);
  EXPECT_EQ(o->rejection, Rejection::kRaster);
  EXPECT_EQ(o->prefix, DraftPrefix::kOwn);
  EXPECT_EQ(o->draft_cfg_scale, 2.0);
  EXPECT_EQ(o->draft_temperature, 0.5);
  EXPECT_EQ(o->resample, ResampleOrder::kParallel);
  EXPECT_EQ(o->parallel_radius, 2);
  auto again = ParseMuloOptions(MuloOptionsToJson(*o), PaperMuloOptions(), "test");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(MuloOptionsToJson(*again), MuloOptionsToJson(*o));
  // Unset keys keep the base.
  auto partial = ParseMuloOptions({{"radius", 1}}, *o, "test");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->radius, 1);
  EXPECT_EQ(partial->prefix, DraftPrefix::kOwn);
}

TEST(MuloOptionsTest, BadKeysAndValuesNameTheField) {
  auto error = [](const nlohmann::json& doc) {
    auto o = ParseMuloOptions(doc, PaperMuloOptions(), "synth family.json");
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << doc.dump();
    return o.status().message();
  };
  EXPECT_NE(error({{"taus", 1}}).find("'taus'"), std::string::npos);
  EXPECT_NE(error({{"tau", -1}}).find("'tau'"), std::string::npos);
  EXPECT_NE(error({{"k", "ten"}}).find("'k'"), std::string::npos);
  EXPECT_NE(error({{"lambda", 0.5}}).find("'lambda'"), std::string::npos);
  EXPECT_NE(error({{"pooling", "sum"}}).find("'pooling'"), std::string::npos);
  EXPECT_NE(error({{"draft_prefix", "mine"}}).find("'draft_prefix'"), std::string::npos);
  EXPECT_NE(error({{"resample", "jacobi"}}).find("'resample'"), std::string::npos);
  EXPECT_NE(error({{"parallel_radius", -1}}).find("'parallel_radius'"), std::string::npos);
  EXPECT_NE(error({{"draft_cfg_scale", 101}}).find("'draft_cfg_scale'"), std::string::npos);
  EXPECT_NE(error(nlohmann::json::array()).find("synth family.json"), std::string::npos);
}

TEST(MuloOptionsTest, AFamilyServesItsDefaultsAndLoadingChecksThem) {
  ModelSet family;
  family.name = "f";
  auto paper = FamilyMuloOptions(family);
  ASSERT_TRUE(paper.ok());
  EXPECT_EQ(MuloOptionsToJson(*paper), MuloOptionsToJson(PaperMuloOptions()));
  family.method_defaults = {{"mulo", {{"draft_prefix", "patch"}, {"tau", 2e-3}}}};
  auto calibrated = FamilyMuloOptions(family);
  ASSERT_TRUE(calibrated.ok());
  EXPECT_EQ(calibrated->prefix, DraftPrefix::kPatch);
  EXPECT_EQ(calibrated->tau, 2e-3);
  EXPECT_EQ(calibrated->radius, 3);  // the paper's where the family is silent
  auto config = DefaultMethodConfig("mulo", family);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->mulo.prefix, DraftPrefix::kPatch);
  EXPECT_TRUE(ValidateMethodDefaults(family).ok());
  family.method_defaults = {{"mulo", {{"radius", -2}}}};
  EXPECT_EQ(ValidateMethodDefaults(family).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DefaultMethodConfig("mulo", family).status().code(), StatusCode::kInvalidArgument);
  family.method_defaults = {{"mulo_sd", {{"tau", 1}}}};
  Status unknown = ValidateMethodDefaults(family);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("mulo_sd"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
