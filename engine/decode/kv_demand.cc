#include "engine/decode/kv_demand.h"

#include "engine/decode/method_registry.h"
#include "engine/sampling/guidance.h"

namespace mulo::engine {
namespace {

const void* ComponentModel(const ModelSet& models, Component component) {
  switch (component) {
    case Component::kDrafter: return models.drafter.get();
    case Component::kChain: return models.chain.get();
    case Component::kEagle: return models.eagle.get();
    case Component::kUpsampler:
    case Component::kDownsampler: return nullptr;  // resamplers keep no cache
  }
  return nullptr;
}

}  // namespace

KvDemand RequestKvDemand(const ModelSet& models, const std::string& method,
                         const SamplingParams& sampling) {
  KvDemand demand;
  demand.needs.push_back({models.target.get(), CfgBatch(sampling)});
  if (const MethodEntry* entry = FindMethod(method); entry != nullptr) {
    for (Component component : entry->needs) {
      if (const void* model = ComponentModel(models, component); model != nullptr) {
        demand.needs.push_back({model, 2});
      }
    }
  }
  return demand;
}

}  // namespace mulo::engine
