// The bundled family loads with the engine and draws images SynthEval accepts: 5 held-out
// prompts with fixed seeds, AR decoding at the family's defaults; at least 4 must pass.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>

#include "engine/decode/ar.h"
#include "engine/decode/generate.h"
#include "synth/heldout.h"
#include "synth/synth_eval.h"

namespace mulo {
namespace {

constexpr char kFamily[] = "models/synth";

TEST(SynthFamilyTest, EveryComponentLoadsAndFits) {
  auto family = engine::LoadModelSet(kFamily, engine::LoadOptions());
  ASSERT_TRUE(family.ok()) << family.status().ToString();
  EXPECT_EQ(family->name, "synth");
  ASSERT_NE(family->target, nullptr);
  ASSERT_NE(family->vq, nullptr);
  ASSERT_NE(family->conditioner, nullptr);
  ASSERT_NE(family->drafter, nullptr);
  ASSERT_NE(family->chain, nullptr);
  ASSERT_NE(family->upsampler, nullptr);
  ASSERT_NE(family->downsampler, nullptr);
  ASSERT_NE(family->eagle, nullptr);
  EXPECT_GE(family->target->config().grid_size, 16);
  EXPECT_GE(family->vq->config().codebook_size, 1024);
  EXPECT_EQ(family->vq->config().codebook_embed_dim, 8);
  EXPECT_EQ(family->drafter->config().grid_size * 2, family->target->config().grid_size);
  EXPECT_EQ(family->upsampler->config().factor, 2);
}

TEST(SynthFamilyTest, FiveHeldOutPromptsPassSynthEval) {
  auto family = engine::LoadModelSet(kFamily, engine::LoadOptions());
  ASSERT_TRUE(family.ok()) << family.status().ToString();
  auto prompts = synth::LoadHeldoutPrompts(std::string(kFamily) + "/heldout_prompts.jsonl");
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_GE(prompts->size(), 5u);
  synth::SynthEval judge;
  engine::ArDecoder ar;
  engine::NullProgressSink sink;
  engine::CancelToken cancel;
  int passed = 0;
  for (int i = 0; i < 5; ++i) {
    const auto& entry = (*prompts)[i];
    engine::SamplingParams sampling;
    sampling.cfg_scale = family->default_cfg_scale;
    sampling.seed = 1000 + i;
    auto result = engine::GenerateImage(ar, *family, entry.prompt, sampling, sink, cancel);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    ASSERT_EQ(result->image.width, family->ImageSize());
    cv::Mat image(static_cast<int>(result->image.height), static_cast<int>(result->image.width),
                  CV_8UC3, result->image.pixels.data());
    auto verdict = judge.Evaluate(entry.prompt, image);
    ASSERT_TRUE(verdict.ok()) << verdict.status().ToString();
    std::cout << (verdict->pass ? "[pass] " : "[fail] ") << entry.prompt << "\n"
              << verdict->ToString() << "\n";
    passed += verdict->pass;
  }
  EXPECT_GE(passed, 4);
}

}  // namespace
}  // namespace mulo
