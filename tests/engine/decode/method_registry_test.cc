// The method registry: one entry per method of the API, in its order; unknown names are
// INVALID_ARGUMENT, declared-but-unimplemented ones UNIMPLEMENTED (never another method run in
// their place), missing components and bad options INVALID_ARGUMENT naming the field; what a
// family can run follows from its components.
#include <gtest/gtest.h>

#include <vector>

#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

ModelSet Tiny() {
  auto family = LoadModelSet("tests/data/repository/tiny", LoadOptions());
  EXPECT_TRUE(family.ok()) << family.status().ToString();
  return family.ok() ? std::move(family).value() : ModelSet();
}

TEST(MethodRegistryTest, ListsEveryMethodOfTheApiOnce) {
  std::vector<std::string> names;
  for (const MethodEntry& entry : Methods()) {
    names.push_back(entry.name);
    EXPECT_EQ(FindMethod(entry.name), &entry);
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    EXPECT_EQ(entry.implemented, entry.make || entry.resolve) << entry.name;
  }
  EXPECT_EQ(names, std::vector<std::string>({"ar", "speculative", "mulo", "eagle", "lantern",
                                             "lantern++", "peanut", "sjd", "gsd", "zipar",
                                             "mc_sjd", "sjd_pac", "auto"}));
  EXPECT_EQ(MethodList(), "ar, speculative, mulo, eagle, lantern, lantern++, peanut, sjd, gsd, "
                          "zipar, mc_sjd, sjd_pac, auto");
  EXPECT_EQ(FindMethod("beam"), nullptr);
}

TEST(MethodRegistryTest, BuildsImplementedMethodsWithTheirOptions) {
  const ModelSet family = Tiny();
  for (const std::string name :
       {"ar", "speculative", "mulo", "eagle", "lantern", "lantern++", "peanut", "sjd", "gsd",
        "zipar", "mc_sjd", "sjd_pac"}) {
    MethodConfig config;
    config.name = name;
    auto method = MakeMethod(config, family);
    ASSERT_OK(method);
    EXPECT_EQ((*method)->name(), name);
  }
  EXPECT_EQ(AvailableMethods(family),
            std::vector<std::string>(
                {"ar", "speculative", "mulo", "eagle", "lantern", "lantern++", "peanut", "sjd",
                 "gsd", "zipar", "mc_sjd", "sjd_pac", "auto"}));
}

TEST(MethodRegistryTest, RefusesUnknownUnimplementedUnavailableAndInvalid) {
  ModelSet family = Tiny();
  MethodConfig config;
  config.name = "beam";
  auto unknown = MakeMethod(config, family);
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message().rfind("method: unknown 'beam'", 0), 0u);
  // The training-free methods need nothing beyond the target; their options are checked.
  for (const std::string name : {"sjd", "gsd", "zipar", "mc_sjd", "sjd_pac"}) {
    config.name = name;
    EXPECT_TRUE(MakeMethod(config, family).ok()) << name;
  }
  config.name = "zipar";
  config.zipar.window = 0;
  auto bad_window = MakeMethod(config, family);
  EXPECT_EQ(bad_window.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_window.status().message().rfind("zipar.window:", 0), 0u);
  // EAGLE is implemented, but without its head the family cannot run it.
  config.name = "eagle";
  family.eagle = nullptr;
  auto no_head = MakeMethod(config, family);
  EXPECT_EQ(no_head.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_head.status().message().find("eagle"), std::string::npos);
  config.name = "mulo";
  config.mulo.tau = -1;
  auto bad_option = MakeMethod(config, family);
  EXPECT_EQ(bad_option.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_option.status().message().rfind("mulo.tau:", 0), 0u);
  config.name = "speculative";
  config.speculative.gamma = 0;
  EXPECT_EQ(MakeMethod(config, family).status().message().rfind("speculative.gamma:", 0), 0u);
  // Without its chain model the family cannot run speculative decoding.
  config.speculative.gamma = 4;
  family.chain = nullptr;
  auto unavailable = MakeMethod(config, family);
  EXPECT_EQ(unavailable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unavailable.status().message().rfind("method: 'speculative' needs", 0), 0u);
  EXPECT_EQ(AvailableMethods(family),  // no head, no chain
            std::vector<std::string>(
                {"ar", "mulo", "sjd", "gsd", "zipar", "mc_sjd", "sjd_pac", "auto"}));
}

}  // namespace
}  // namespace mulo::engine
