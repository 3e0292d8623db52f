// What the family benchmarks (synth_quality, methods_bench) start from: the model family, the
// first `limit` held-out prompts, and torch's thread count; errors are printed for the user.
#ifndef MULO_BENCH_FAMILY_INPUTS_H_
#define MULO_BENCH_FAMILY_INPUTS_H_

#include <torch/torch.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/cpu_threads.h"
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

}  // namespace mulo::bench

#endif  // MULO_BENCH_FAMILY_INPUTS_H_
