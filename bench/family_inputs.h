// What the family benchmarks (synth_quality, methods_bench, batching_bench, graph_reuse_bench)
// start from: the model family, the first `limit` held-out prompts, torch's thread count and
// the methods with their defaults; errors are printed for the user.
#ifndef MULO_BENCH_FAMILY_INPUTS_H_
#define MULO_BENCH_FAMILY_INPUTS_H_

#include <torch/types.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "synth/heldout.h"

namespace mulo::bench {

struct FamilyInputs {
  engine::ModelSet family;
  std::vector<synth::HeldoutEntry> prompts;  // the first `limit` (all when limit <= 0)
};

inline std::optional<FamilyInputs> LoadFamilyInputs(
    const std::string& models_dir, const std::string& prompts_path, int limit, int threads,
    const engine::LoadOptions& options = engine::LoadOptions()) {
  engine::SetCpuThreads(threads);
  auto family = engine::LoadModelSet(models_dir, options);
  if (!family.ok()) {
    std::fprintf(stderr, "error: %s\n", family.status().ToString().c_str());
    return std::nullopt;
  }
  auto prompts = synth::LoadHeldoutPrompts(prompts_path);
  if (!prompts.ok()) {
    std::fprintf(stderr, "error: %s\n", prompts.status().ToString().c_str());
    return std::nullopt;
  }
  if (prompts->empty()) {
    // A table over zero prompts would print 0% everywhere and look like a measurement.
    std::fprintf(stderr, "error: --prompts: %s holds no prompts\n", prompts_path.c_str());
    return std::nullopt;
  }
  if (limit > 0 && static_cast<size_t>(limit) < prompts->size()) prompts->resize(limit);
  return FamilyInputs{*std::move(family), *std::move(prompts)};
}

// Method `name` with its defaults for `family`, or null with the error printed.
inline std::shared_ptr<const engine::DecodingMethod> DefaultMethod(const std::string& name,
                                                                   const engine::ModelSet& family) {
  auto config = engine::DefaultMethodConfig(name, family);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return nullptr;
  }
  auto method = engine::MakeMethod(*config, family);
  if (!method.ok()) {
    std::fprintf(stderr, "error: %s\n", method.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(method);
}

}  // namespace mulo::bench

#endif  // MULO_BENCH_FAMILY_INPUTS_H_
