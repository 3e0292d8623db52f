// Behaviour pinned token for token: ar, speculative and four MuLo-SD settings at temperatures 0
// and 1 on the first 32 held-out prompts of the bundled family (seed = prompt id, one torch
// thread) give exactly the tokens in tests/data/golden_tokens.jsonl, recorded before the
// decoding-skeleton refactor at commit 2c3140c; the 76 pooled MuLo-SD sequences at temperature 1
// were re-recorded when the latent neighbour order moved to the raw codebook weights (LANTERN's;
// with the normalised order every sequence still matched); all 192 sequences at temperature 1
// were re-recorded when the request's random streams became counter-based (Philox4x32-10,
// engine/sampling/rng.h, issue 40), and the 192 greedy ones were unchanged by it. Refactors
// of the decoding code must leave them unchanged. One test per configuration, so that Bazel's
// shards split them. To re-record (only for a deliberate change of behaviour, said in the
// commit; every test appends its configuration's lines):
//   rm tests/data/golden_tokens.jsonl
//   MULO_RECORD_GOLDEN=$PWD/tests/data/golden_tokens.jsonl bazel run //tests/engine/decode:golden_tokens_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/decode/ar.h"
#include "engine/decode/generate.h"
#include "engine/decode/mulo.h"
#include "engine/decode/speculative.h"
#include "engine/model/model_set.h"

namespace mulo::engine {
namespace {

constexpr int kPrompts = 32;

struct Config {
  std::string name;
  std::shared_ptr<const DecodingMethod> method;
};

std::vector<Config> Configs() {
  MuloOptions raster, accept_all, keep;
  raster.rejection = Rejection::kRaster;
  accept_all.tau = 0.0;
  keep.prefix = DraftPrefix::kKeepDrafted;
  return {{"ar", std::make_shared<ArDecoder>()},
          {"speculative", std::make_shared<SpeculativeDecoder>(SpeculativeOptions{4})},
          {"mulo", std::make_shared<MuloDecoder>()},
          {"mulo raster", std::make_shared<MuloDecoder>(raster)},
          {"mulo tau 0", std::make_shared<MuloDecoder>(accept_all)},
          {"mulo keep-drafted", std::make_shared<MuloDecoder>(keep)}};
}

std::string Key(const std::string& config, double temperature, int prompt) {
  return config + " | t=" + std::to_string(static_cast<int>(temperature)) + " | " +
         std::to_string(prompt);
}

class GoldenTokensTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GoldenTokensTest, TheConfigurationReproducesItsRecordedTokens) {
  const Config config = Configs()[GetParam()];
  SetCpuThreads(1);  // BLAS results depend on the thread count
  auto family = LoadModelSet("models/synth", LoadOptions());
  ASSERT_TRUE(family.ok()) << family.status().ToString();
  std::ifstream prompts_file("models/synth/heldout_prompts.jsonl");
  std::vector<std::pair<int, std::string>> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < kPrompts && std::getline(prompts_file, line)) {
    const auto doc = nlohmann::json::parse(line);
    prompts.emplace_back(doc["id"].get<int>(), doc["prompt"].get<std::string>());
  }
  ASSERT_EQ(static_cast<int>(prompts.size()), kPrompts);

  const char* record = std::getenv("MULO_RECORD_GOLDEN");
  std::map<std::string, std::vector<int32_t>> golden;
  if (record == nullptr) {
    std::ifstream in("tests/data/golden_tokens.jsonl");
    ASSERT_TRUE(in.good()) << "tests/data/golden_tokens.jsonl is missing";
    while (std::getline(in, line)) {
      const auto doc = nlohmann::json::parse(line);
      golden[doc["key"].get<std::string>()] = doc["tokens"].get<std::vector<int32_t>>();
    }
    ASSERT_EQ(golden.size(), Configs().size() * 2 * kPrompts);
  }
  std::ofstream out;
  if (record != nullptr) out.open(record, std::ios::app);
  int compared = 0;
  for (const auto& [id, prompt] : prompts) {
    auto condition = ConditionFromPrompt(*family, prompt);
    ASSERT_TRUE(condition.ok()) << condition.status().ToString();
    for (double temperature : {0.0, 1.0}) {
      {
        DecodeRequest request;
        request.condition = *condition;
        request.sampling.cfg_scale = family->default_cfg_scale;
        request.sampling.temperature = temperature;
        request.sampling.seed = static_cast<uint64_t>(id);
        NullProgressSink sink;
        CancelToken cancel;
        auto result = config.method->Decode(request, *family, sink, cancel);
        ASSERT_TRUE(result.ok()) << config.name << ": " << result.status().ToString();
        const std::string key = Key(config.name, temperature, id);
        if (record != nullptr) {
          out << nlohmann::json{{"key", key}, {"tokens", result->tokens}}.dump() << "\n";
          continue;
        }
        EXPECT_EQ(result->tokens, golden.at(key)) << key;
        ++compared;
      }
    }
  }
  if (record == nullptr) {
    EXPECT_EQ(compared, 2 * kPrompts);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryConfiguration, GoldenTokensTest,
                         ::testing::Range<size_t>(0, Configs().size()));

}  // namespace
}  // namespace mulo::engine
