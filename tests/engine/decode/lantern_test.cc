// LANTERN and LANTERN++ on the sd_tiny family: with the relaxation off (delta 0, lambda 1,
// k 0) they give EAGLE's tokens exactly, at temperature 0 and 1, for the dynamic and static
// trees; with it on they accept drafts the exact rule would not, longer paths on average, and
// count their pooled sets; options and family defaults are validated by name.
#include "engine/decode/lantern.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/decode/method_registry.h"
#include "tests/engine/decode/sd_fixture.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::LoadSd;
using testing::RunMethod;
using testing::SdFixture;

// sd_tiny has no VQ decoder; its 16 codes are given latent positions on a line, so the
// nearest entries of code c are c - 1, c + 1, c - 2, ...
SdFixture LoadWithNeighbours() {
  SdFixture f = LoadSd();
  f.models.neighbors = std::make_shared<LatentNeighbors>(LatentNeighbors::Build(
      torch::arange(16, torch::kFloat32).view({16, 1}), 15));
  return f;
}

EagleOptions Tree(bool static_tree) {
  EagleOptions o;
  o.static_tree = static_tree;
  o.dynamic = {8, 3, 3};
  return o;
}

// A refusal with `code` whose message mentions `text` (the field it names).
void ExpectRefused(const Status& status, StatusCode code, const std::string& text) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

SamplingParams Sampling(double temperature, uint64_t seed) {
  SamplingParams s;
  s.temperature = temperature;
  s.cfg_scale = 2.0;
  s.seed = seed;
  return s;
}

TEST(LanternTest, RelaxationOffGivesEaglesTokens) {
  SdFixture f = LoadWithNeighbours();
  for (double temperature : {0.0, 1.0}) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const SamplingParams s = Sampling(temperature, seed);
      for (bool static_tree : {false, true}) {
        auto eagle = RunMethod(EagleDecoder(Tree(static_tree)), f, s);
        ASSERT_OK(eagle);
        LanternOptions delta_zero{15, 0.0, Tree(static_tree)};
        LanternOptions k_zero{0, 0.4, Tree(static_tree)};
        for (const LanternOptions& o : {delta_zero, k_zero}) {
          auto lantern = RunMethod(LanternDecoder(o), f, s);
          ASSERT_OK(lantern);
          EXPECT_EQ(lantern->tokens, eagle->tokens)
              << "temperature " << temperature << " seed " << seed << " k " << o.k;
          EXPECT_EQ(lantern->stats.relaxed_accepted_tokens, 0);
          EXPECT_EQ(lantern->stats.accepted_tokens, eagle->stats.accepted_tokens);
        }
      }
      // LANTERN++ runs the static tree: lambda 1 is EAGLE-1.
      auto eagle_static = RunMethod(EagleDecoder(Tree(true)), f, s);
      ASSERT_OK(eagle_static);
      LanternPlusPlusOptions lambda_one;
      lambda_one.k = 15;
      lambda_one.lambda = 1.0;
      auto plus = RunMethod(LanternPlusPlusDecoder(lambda_one), f, s);
      ASSERT_OK(plus);
      EXPECT_EQ(plus->tokens, eagle_static->tokens) << "seed " << seed;
    }
  }
}

TEST(LanternTest, RelaxationAcceptsMoreAndCountsItsPooledSets) {
  SdFixture f = LoadWithNeighbours();
  int64_t eagle_dynamic = 0, eagle_static = 0, lantern = 0, plus = 0;
  Stats lantern_stats, plus_stats;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const SamplingParams s = Sampling(1.0, seed);
    auto e1 = RunMethod(EagleDecoder(Tree(false)), f, s);
    auto e2 = RunMethod(EagleDecoder(Tree(true)), f, s);
    auto l = RunMethod(LanternDecoder({4, 0.3, Tree(false)}), f, s);
    LanternPlusPlusOptions o;
    o.k = 4;
    o.lambda = 5.0;
    auto p = RunMethod(LanternPlusPlusDecoder(o), f, s);
    ASSERT_OK(e1);
    ASSERT_OK(e2);
    ASSERT_OK(l);
    ASSERT_OK(p);
    EXPECT_EQ(l->tokens.size(), 16u);
    EXPECT_EQ(p->tokens.size(), 16u);
    eagle_dynamic += e1->stats.accepted_tokens;
    eagle_static += e2->stats.accepted_tokens;
    lantern += l->stats.accepted_tokens;
    plus += p->stats.accepted_tokens;
    lantern_stats.relaxed_accepted_tokens += l->stats.relaxed_accepted_tokens;
    lantern_stats.pooled_drafts += l->stats.pooled_drafts;
    lantern_stats.pooled_neighbors += l->stats.pooled_neighbors;
    plus_stats.relaxed_accepted_tokens += p->stats.relaxed_accepted_tokens;
    plus_stats.pooled_drafts += p->stats.pooled_drafts;
    plus_stats.pooled_neighbors += p->stats.pooled_neighbors;
  }
  EXPECT_GT(lantern, eagle_dynamic);
  EXPECT_GT(plus, eagle_static);
  for (const Stats& s : {lantern_stats, plus_stats}) {
    EXPECT_GT(s.relaxed_accepted_tokens, 0);
    EXPECT_GT(s.pooled_drafts, 0);
    EXPECT_GT(s.MeanPooledNeighbors(), 0.0);
    EXPECT_LE(s.MeanPooledNeighbors(), 4.0);  // at most k
  }
}

TEST(LanternTest, OptionsAreValidatedByName) {
  SdFixture f = LoadWithNeighbours();
  auto refused = [&](const MethodConfig& config) {
    return MakeMethod(config, f.models).status();
  };
  MethodConfig c;
  c.name = "lantern";
  c.lantern.delta = 1.5;
  ExpectRefused(refused(c), StatusCode::kInvalidArgument, "lantern.delta");
  c.lantern.delta = 0.1;
  c.lantern.k = -1;
  ExpectRefused(refused(c), StatusCode::kInvalidArgument, "lantern.k");
  c.lantern.k = 10;
  c.lantern.tree.dynamic.total_tokens = 0;
  ExpectRefused(refused(c), StatusCode::kInvalidArgument, "lantern.tree.total_tokens");
  c.lantern.tree.dynamic.total_tokens = 8;
  ASSERT_OK(MakeMethod(c, f.models));
  c = MethodConfig();
  c.name = "lantern++";
  c.lantern_plus_plus.lambda = 0.5;
  ExpectRefused(refused(c), StatusCode::kInvalidArgument, "lantern++.lambda");
  c.lantern_plus_plus.lambda = 2.0;
  ASSERT_OK(MakeMethod(c, f.models));
  // Without a neighbour table (no VQ codebook) the relaxed methods cannot run.
  f.models.neighbors = nullptr;
  EXPECT_EQ(refused(c).code(), StatusCode::kFailedPrecondition);
}

TEST(LanternTest, FamilyDefaultsOverThePapers) {
  ModelSet models;
  models.name = "test";
  auto paper = DefaultMethodConfig("lantern", models);
  ASSERT_OK(paper);
  EXPECT_EQ(paper->lantern.k, 1000);  // the paper's
  EXPECT_EQ(paper->lantern_plus_plus.k, 10);
  models.method_defaults = nlohmann::json::parse(
      R"({"lantern": {"k": 63, "delta": 0.2}, "lantern++": {"k": 1, "lambda": 3}})");
  auto config = DefaultMethodConfig("lantern++", models);
  ASSERT_OK(config);
  EXPECT_EQ(config->lantern.k, 63);
  EXPECT_DOUBLE_EQ(config->lantern.delta, 0.2);
  EXPECT_EQ(config->lantern_plus_plus.k, 1);
  EXPECT_DOUBLE_EQ(config->lantern_plus_plus.lambda, 3.0);
  EXPECT_EQ(config->peanut.lantern_k, 63);  // PEANUT + LANTERN pools LANTERN's neighbourhood
  models.method_defaults["lantern"]["delta"] = 2.0;
  ExpectRefused(DefaultMethodConfig("lantern", models).status(), StatusCode::kInvalidArgument,
                "method_defaults.lantern: field 'delta'");
  ExpectRefused(ValidateMethodDefaults(models), StatusCode::kInvalidArgument, "delta");
}

}  // namespace
}  // namespace mulo::engine
