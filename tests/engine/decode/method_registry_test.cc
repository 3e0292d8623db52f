// The method registry: one entry per method of the API, in its order; unknown names are
// INVALID_ARGUMENT, declared-but-unimplemented ones UNIMPLEMENTED (never another method run in
// their place), missing components and bad options INVALID_ARGUMENT naming the field; what a
// family can run follows from its components.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
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

// The registry's order is checked against the proto's oneof in one place
// (tests/server/request_validation_test.cc); here every entry is whole and found by name.
TEST(MethodRegistryTest, ListsEveryMethodOnce) {
  std::vector<std::string> names;
  for (const MethodEntry& entry : Methods()) {
    EXPECT_EQ(std::count(names.begin(), names.end(), entry.name), 0) << entry.name;
    names.push_back(entry.name);
    EXPECT_EQ(FindMethod(entry.name), &entry);
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    EXPECT_EQ(entry.implemented, entry.make || entry.resolve) << entry.name;
  }
  EXPECT_EQ(names.front(), "ar");  // a request without a method runs ar
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  EXPECT_EQ(MethodList(), joined);
  EXPECT_EQ(FindMethod("beam"), nullptr);
}

// The tiny family has every component, so it runs every implemented method.
TEST(MethodRegistryTest, BuildsImplementedMethodsWithTheirOptions) {
  const ModelSet family = Tiny();
  std::vector<std::string> implemented;
  for (const MethodEntry& entry : Methods()) {
    if (!entry.implemented) continue;
    implemented.push_back(entry.name);
    if (!entry.make) continue;  // auto stands for the method it resolves to
    MethodConfig config;
    config.name = entry.name;
    auto method = MakeMethod(config, family);
    ASSERT_OK(method);
    EXPECT_EQ((*method)->name(), entry.name);
  }
  EXPECT_EQ(AvailableMethods(family), implemented);
}

// --max_tree_nodes reads each method's trees from its spec: the tree methods say which option
// sets each tree and how many nodes it has; chains, windows and static trees have none.
TEST(MethodRegistryTest, TreeMethodsSayWhichOptionSizesTheirTrees) {
  auto demands = [](MethodConfig config) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const TreeDemand& tree : TreeDemands(config)) out.push_back({tree.field, tree.nodes});
    return out;
  };
  using Demands = std::vector<std::pair<std::string, int64_t>>;
  MethodConfig config;
  config.name = "eagle";  // EAGLE-2: 60 verified, 7 x 10 expanded
  EXPECT_EQ(demands(config), (Demands{{"eagle.total_tokens", 60}, {"eagle.top_k", 70}}));
  config.eagle.static_tree = true;
  EXPECT_TRUE(demands(config).empty());
  config.name = "lantern";
  config.lantern.tree.dynamic.depth = 8;
  config.lantern.tree.dynamic.top_k = 13;
  EXPECT_EQ(demands(config),
            (Demands{{"lantern.tree.total_tokens", 60}, {"lantern.tree.top_k", 104}}));
  config.name = "peanut";
  config.peanut.shape.max_depth = 10;
  config.peanut.shape.max_top_k = 40;
  EXPECT_EQ(demands(config), (Demands{{"peanut.tree.total_tokens", 60},
                                      {"peanut.tree.top_k", 70},
                                      {"peanut.max_top_k", 9 * 39}}));
  config.name = "sjd_pac";
  config.sjd_pac.width = 10;
  config.sjd_pac.depth = 3;
  EXPECT_EQ(demands(config), (Demands{{"sjd_pac.width", 110}}));
  EXPECT_EQ(TreeDemands(config).front().what, "a tree branching width 10 to depth 3");
  for (const std::string name :
       {"ar", "speculative", "mulo", "lantern++", "sjd", "zipar", "beam"}) {
    config.name = name;
    EXPECT_TRUE(demands(config).empty()) << name;
  }
}

TEST(MethodRegistryTest, RefusesUnknownUnimplementedUnavailableAndInvalid) {
  ModelSet family = Tiny();
  MethodConfig config;
  config.name = "beam";
  auto unknown = MakeMethod(config, family);
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message().rfind("method: unknown 'beam'", 0), 0u);
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
  // Without a head and a chain, exactly the methods that need neither remain.
  std::vector<std::string> without;
  for (const MethodEntry& entry : Methods()) {
    const bool needs_gone = std::any_of(entry.needs.begin(), entry.needs.end(), [](Component c) {
      return c == Component::kEagle || c == Component::kChain;
    });
    if (entry.implemented && !needs_gone) without.push_back(entry.name);
  }
  EXPECT_EQ(AvailableMethods(family), without);
  for (const std::string name : {"speculative", "eagle", "lantern", "peanut"}) {
    EXPECT_EQ(std::count(without.begin(), without.end(), name), 0) << name;
  }
  EXPECT_EQ(std::count(without.begin(), without.end(), "sjd_pac"), 1);
}

}  // namespace
}  // namespace mulo::engine
