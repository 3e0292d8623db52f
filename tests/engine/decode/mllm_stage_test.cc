// Tar's MLLM stage on a tiny family: text ids -> MLLM (a Qwen2 writing TA-Tok ids on the
// decoding methods) -> TA-Tok de-quantiser -> AR-DTok -> VQ. Driving the pipeline with the
// prompt's ids gives the image tokens that driving it with the stage's TA-Tok ids gives; the
// stage decodes with any single-model method (sjd reproduces ar's greedy ids); refusals name
// the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/decode/ar.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/generate.h"
#include "engine/decode/sjd.h"
#include "engine/model/model_set.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::FixtureDir;

constexpr int64_t kImageTokenOffset = 128;  // TA-Tok id k is the tiny Qwen2's text id 128 + k

// A family directory: tar_tiny (4 condition rows: a 2 x 2 MLLM grid), ta_tok_tiny (96 codes),
// vq_tiny and, with `mllm`, qwen2_tiny with 96 image tokens.
// `pipeline`, when not null, is written as family.json's "pipeline".
std::string TinyTarDir(const std::string& name, bool mllm, bool ta_tok = true,
                       const nlohmann::json& pipeline = nullptr) {
  namespace fs = std::filesystem;
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  fs::create_directories(dir);
  nlohmann::json components = {{"target", "target"}, {"vq", "vq"}};
  fs::create_directory_symlink(fs::absolute(FixtureDir("tar_tiny")), dir + "/target");
  fs::create_directory_symlink(fs::absolute(FixtureDir("vq_tiny")), dir + "/vq");
  if (ta_tok) {
    fs::create_directory_symlink(fs::absolute(FixtureDir("ta_tok_tiny")), dir + "/ta_tok");
    components["ta_tok"] = "ta_tok";
  }
  if (mllm) {
    const std::string lm = FixtureDir("qwen2_tiny") + "/lm";
    fs::create_directories(dir + "/mllm");
    nlohmann::json config;
    std::ifstream(lm + "/config.json") >> config;
    config["image_token_offset"] = kImageTokenOffset;
    config["image_token_count"] = 96;
    std::ofstream(dir + "/mllm/config.json") << config.dump(2);
    fs::create_symlink(fs::absolute(lm + "/model.safetensors"), dir + "/mllm/model.safetensors");
    components["mllm"] = "mllm";
  }
  nlohmann::json family = {{"name", name}, {"components", components}};
  if (!pipeline.is_null()) family["pipeline"] = pipeline;
  std::ofstream(dir + "/family.json") << family.dump(2);
  return dir;
}

const ModelSet& Family() {
  static const ModelSet* family = [] {
    auto loaded = LoadModelSet(TinyTarDir("tar_mllm", true), LoadOptions());
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return new ModelSet(loaded.ok() ? *std::move(loaded) : ModelSet());
  }();
  return *family;
}

class NullSink : public ProgressSink {
 public:
  void OnRows(int64_t, int64_t, const std::vector<int32_t>&) override {}
};

const std::vector<int64_t> kPromptIds = {11, 250, 7, 3, 99, 42, 5};

TEST(MllmStageTest, TheFamilyLoadsItsMllmAsAStage) {
  const ModelSet& family = Family();
  ASSERT_NE(family.mllm_stage, nullptr);
  const TokenModel& mllm = *family.mllm_stage->target;
  EXPECT_EQ(mllm.architecture(), "qwen2");
  EXPECT_EQ(mllm.grid_size(), 2);  // the target's 4 condition rows
  EXPECT_EQ(mllm.vocab_size(), 96);
  EXPECT_EQ(mllm.condition_shape().mode, ConditionMode::kPromptIds);
}

TEST(MllmStageTest, PromptIdsGiveTheImageTheStagesTaTokIdsGive) {
  const ModelSet& family = Family();
  ASSERT_NE(family.mllm_stage, nullptr);
  SamplingParams sampling;
  sampling.seed = 5;
  sampling.temperature = 0.0;
  CancelToken cancel;
  NullSink sink;

  auto ta_tok_ids =
      RunMllmStage(family, kPromptIds, nullptr, TarMllmSampling(sampling.seed), cancel);
  ASSERT_OK(ta_tok_ids);
  ASSERT_EQ(ta_tok_ids->size(), 4u);
  for (int64_t id : *ta_tok_ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 96);
  }

  Condition from_prompt;
  from_prompt.prompt_ids = kPromptIds;
  auto staged = GenerateImage(ArDecoder(), family, from_prompt, sampling, sink, cancel);
  ASSERT_OK(staged);
  Condition from_ids;
  from_ids.ta_tok_ids = *ta_tok_ids;
  auto direct = GenerateImage(ArDecoder(), family, from_ids, sampling, sink, cancel);
  ASSERT_OK(direct);
  EXPECT_EQ(staged->tokens, direct->tokens);
  EXPECT_EQ(staged->image.pixels, direct->image.pixels);
  EXPECT_GT(staged->stats.PhaseSeconds(Phase::kTextStage), 0.0);
  EXPECT_EQ(direct->stats.PhaseSeconds(Phase::kTextStage), 0.0);

  // Another seed draws other TA-Tok ids somewhere over a few tries (temperature 1).
  bool differs = false;
  for (uint64_t seed = 6; seed < 12 && !differs; ++seed) {
    auto other = RunMllmStage(family, kPromptIds, nullptr, TarMllmSampling(seed), cancel);
    ASSERT_OK(other);
    differs = *other != *ta_tok_ids;
  }
  EXPECT_TRUE(differs);
}

TEST(MllmStageTest, SjdReproducesArOnTheStage) {
  const ModelSet& family = Family();
  ASSERT_NE(family.mllm_stage, nullptr);
  CancelToken cancel;
  SamplingParams greedy = TarMllmSampling(1);
  greedy.temperature = 0.0;
  auto ar = RunMllmStage(family, kPromptIds, nullptr, greedy, cancel);
  const SjdDecoder sjd;
  auto jacobi = RunMllmStage(family, kPromptIds, &sjd, greedy, cancel);
  ASSERT_OK(ar);
  ASSERT_OK(jacobi);
  EXPECT_EQ(*ar, *jacobi);
}

TEST(MllmStageTest, ThePipelineRunsFromWhatTheRequestCarriesAndCountsTheStage) {
  const ModelSet& family = Family();
  ASSERT_EQ(family.pipeline.size(), 2u);
  EXPECT_EQ(family.pipeline[0]->name(), "mllm");
  EXPECT_EQ(family.pipeline[1]->name(), "ta_tok");
  EXPECT_EQ(family.StageReading(ConditionForm::kTaTokIds), family.pipeline[1].get());
  EXPECT_EQ(family.StageReading(ConditionForm::kCaptionIds), nullptr);
  SamplingParams sampling;
  sampling.temperature = 0.0;
  CancelToken cancel;
  NullSink sink;
  const SjdDecoder sjd;
  for (const DecodingMethod* stage_method : {static_cast<const DecodingMethod*>(nullptr),
                                             static_cast<const DecodingMethod*>(&sjd)}) {
    GenerateOptions options;
    options.mllm_method = stage_method;
    Condition from_prompt;
    from_prompt.prompt_ids = kPromptIds;
    auto staged = GenerateImage(ArDecoder(), family, from_prompt, sampling, sink, cancel, options);
    ASSERT_OK(staged);
    EXPECT_EQ(staged->stats.text_stage_tokens, 4);  // the target's 4 condition rows
    EXPECT_GE(staged->stats.text_stage_forward_passes, 1);
    EXPECT_LE(staged->stats.text_stage_forward_passes, 5);
    EXPECT_EQ(staged->stats.tokens, 64);  // the image's own counters are the image's
  }
  // TA-Tok ids enter at the de-quantiser: the MLLM does not run.
  Condition from_ids;
  from_ids.ta_tok_ids = {1, 2, 3, 4};
  auto direct = GenerateImage(ArDecoder(), family, from_ids, sampling, sink, cancel);
  ASSERT_OK(direct);
  EXPECT_EQ(direct->stats.text_stage_tokens, 0);
  EXPECT_EQ(direct->stats.text_stage_forward_passes, 0);
  // Nothing in the pipeline reads FLAN-T5 ids.
  Condition caption;
  caption.caption_ids = {5, 6, 1};
  auto refused = GenerateImage(ArDecoder(), family, caption, sampling, sink, cancel);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("caption_ids", 0), 0u) << refused.status().message();
}

// Two prompts at once on an engine loop: the MLLM's forwards batch across the requests (and with
// the image's), and each request gets exactly the ids and image tokens it gets alone.
TEST(MllmStageTest, TheStageBatchesAcrossRequestsExactly) {
  const ModelSet& family = Family();
  CancelToken cancel;
  NullSink sink;
  const std::vector<uint64_t> seeds = {3, 4};
  std::vector<std::vector<int32_t>> alone;
  for (uint64_t seed : seeds) {
    SamplingParams sampling;
    sampling.seed = seed;
    Condition prompt;
    prompt.prompt_ids = kPromptIds;
    auto result = GenerateImage(ArDecoder(), family, prompt, sampling, sink, cancel);
    ASSERT_OK(result);
    alone.push_back(result->tokens);
  }
  ASSERT_NE(alone[0], alone[1]);  // the seeds draw other TA-Tok ids and images
  int64_t most_calls = 0;
  EngineLoop loop({256, PackedGemms::kPerSequence}, [&](const EngineLoop::BatchEvent& event) {
    most_calls = std::max(most_calls, event.calls);
  });
  std::vector<std::vector<int32_t>> batched(seeds.size());
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < seeds.size(); ++i) {
    tasks.push_back([&, i] {
      SamplingParams sampling;
      sampling.seed = seeds[i];
      Condition prompt;
      prompt.prompt_ids = kPromptIds;
      GenerateOptions options;
      options.loop = &loop;
      NullSink own_sink;
      auto result = GenerateImage(ArDecoder(), family, prompt, sampling, own_sink, cancel, options);
      EXPECT_TRUE(result.ok()) << result.status().ToString();
      if (result.ok()) batched[i] = result->tokens;
    });
  }
  EngineLoop::ListSource source(std::move(tasks), static_cast<int>(seeds.size()));
  ASSERT_TRUE(loop.Serve(source).ok());
  EXPECT_EQ(batched, alone);
  EXPECT_GE(most_calls, 2);  // some forward carried both requests' calls

  // The stage's language model alone: its forwards from two requests share every batch (the
  // loop starts both before it runs a forward).
  most_calls = 0;
  std::vector<std::vector<int32_t>> stage_alone, stage_batched(seeds.size());
  for (uint64_t seed : seeds) {
    DecodeRequest request;
    request.condition.prompt_ids = kPromptIds;
    request.sampling = TarMllmSampling(seed);
    request.sampling.top_k = 96;
    auto decoded = ArDecoder().Decode(request, *family.mllm_stage, sink, cancel);
    ASSERT_OK(decoded);
    stage_alone.push_back(decoded->tokens);
  }
  std::vector<EngineLoop::Task> stage_tasks;
  for (size_t i = 0; i < seeds.size(); ++i) {
    stage_tasks.push_back([&, i] {
      DecodeRequest request;
      request.condition.prompt_ids = kPromptIds;
      request.sampling = TarMllmSampling(seeds[i]);
      request.sampling.top_k = 96;
      request.loop = &loop;
      NullSink own_sink;
      auto decoded = ArDecoder().Decode(request, *family.mllm_stage, own_sink, cancel);
      EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
      if (decoded.ok()) stage_batched[i] = decoded->tokens;
    });
  }
  EngineLoop::ListSource stage_source(std::move(stage_tasks), static_cast<int>(seeds.size()));
  ASSERT_TRUE(loop.Serve(stage_source).ok());
  EXPECT_EQ(stage_batched, stage_alone);
  EXPECT_GE(most_calls, 2);
}

TEST(MllmStageTest, AnExplicitPipelineMustChainToTheTarget) {
  auto in_order =
      LoadModelSet(TinyTarDir("tar_in_order", true, true, {"mllm", "ta_tok"}), LoadOptions());
  ASSERT_OK(in_order);
  EXPECT_EQ(in_order->pipeline.size(), 2u);
  // Only the de-quantiser: prompt ids are then refused, TA-Tok ids served.
  auto ta_tok_only =
      LoadModelSet(TinyTarDir("tar_ta_tok_only", true, true, {"ta_tok"}), LoadOptions());
  ASSERT_OK(ta_tok_only);
  EXPECT_EQ(ta_tok_only->StageReading(ConditionForm::kPromptIds), nullptr);
  for (const auto& [name, pipeline] :
       std::vector<std::pair<std::string, nlohmann::json>>{
           {"tar_reversed", {"ta_tok", "mllm"}},  // features are not prompt ids
           {"tar_mllm_last", nlohmann::json::array({"mllm"})},  // TA-Tok ids: not features
           {"tar_unknown", nlohmann::json::array({"t5"})},  // not a loaded component
           {"tar_not_a_list", "mllm"}}) {
    auto refused = LoadModelSet(TinyTarDir(name, true, true, pipeline), LoadOptions());
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(refused.status().message().find("'pipeline'"), std::string::npos)
        << name << ": " << refused.status().message();
  }
}

TEST(MllmStageTest, RefusalsNameTheField) {
  CancelToken cancel;
  NullSink sink;
  SamplingParams sampling;
  auto plain = LoadModelSet(TinyTarDir("tar_plain", false), LoadOptions());
  ASSERT_OK(plain);
  Condition prompt;
  prompt.prompt_ids = kPromptIds;
  auto refused = GenerateImage(ArDecoder(), *plain, prompt, sampling, sink, cancel);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("prompt_ids"), std::string::npos);

  auto too_long = std::vector<int64_t>(200, 1);  // past the tiny model's 124 prompt rows
  auto long_prompt = RunMllmStage(Family(), too_long, nullptr, TarMllmSampling(0), cancel);
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_NE(long_prompt.status().message().find("prompt_ids"), std::string::npos);

  auto no_ta_tok = LoadModelSet(TinyTarDir("tar_no_ta_tok", true, false), LoadOptions());
  ASSERT_FALSE(no_ta_tok.ok());
  EXPECT_NE(no_ta_tok.status().message().find("components.mllm"), std::string::npos);
}

}  // namespace
}  // namespace mulo::engine
