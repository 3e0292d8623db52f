#include "tests/engine/decode/synth_jobs.h"

#include <gtest/gtest.h>

#include "engine/core/cpu_threads.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "synth/heldout.h"

namespace mulo::engine::testing {

std::shared_ptr<const ModelSet> LoadSynthFamily(const LoadOptions& options) {
  SetCpuThreads(1);
  auto loaded = LoadModelSet("models/synth", options);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? std::make_shared<const ModelSet>(*std::move(loaded)) : nullptr;
}

const ModelSet& SynthFamily() {
  static const std::shared_ptr<const ModelSet> family = LoadSynthFamily();
  return *family;
}

std::vector<std::string> SynthPrompts(int count) {
  auto entries = synth::LoadHeldoutPrompts("models/synth/heldout_prompts.jsonl");
  EXPECT_TRUE(entries.ok()) << entries.status();
  std::vector<std::string> prompts;
  for (int i = 0; entries.ok() && i < count && i < static_cast<int>(entries->size()); ++i) {
    prompts.push_back((*entries)[i].prompt);
  }
  return prompts;
}

std::vector<SynthJob> EveryMethodTwice(const ModelSet& family) {
  std::vector<SynthJob> jobs;
  int prompt = 0;
  for (const std::string& method : AvailableMethods(family)) {
    for (double temperature : {0.0, 1.0}) jobs.push_back({method, prompt++ % 8, temperature});
  }
  return jobs;
}

DecodeRequest SynthRequest(const SynthJob& job, const ModelSet& family) {
  static const std::vector<std::string> prompts = SynthPrompts(8);
  DecodeRequest request;
  auto condition = ConditionFromPrompt(family, prompts.at(job.prompt));
  EXPECT_TRUE(condition.ok()) << condition.status().ToString();
  if (condition.ok()) request.condition = *condition;
  request.sampling.cfg_scale = family.default_cfg_scale;
  request.sampling.temperature = job.temperature;
  request.sampling.seed = 1000 + job.prompt;
  return request;
}

StatusOr<DecodeResult> DecodeSynthJob(const SynthJob& job, const ModelSet& family,
                                      EngineLoop* loop, KvReservation* kv,
                                      const CancelToken& cancel, ProgressSink& sink) {
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(job.method, family));
  MULO_ASSIGN_OR_RETURN(auto method, MakeMethod(config, family));
  DecodeRequest request = SynthRequest(job, family);
  request.loop = loop;
  request.kv = kv;
  return method->Decode(request, family, sink, cancel);
}

}  // namespace mulo::engine::testing
