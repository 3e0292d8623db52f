#include "engine/decode/kv_demand.h"

#include "engine/decode/method_registry.h"
#include "engine/sampling/guidance.h"

namespace mulo::engine {

KvDemand RequestKvDemand(const ModelSet& models, const std::string& method,
                         const SamplingParams& sampling) {
  KvDemand demand;
  demand.needs.push_back({models.target.get(), CfgBatch(sampling)});
  if (const MethodEntry* entry = FindMethod(method); entry != nullptr) {
    for (Component component : entry->needs) {
      // Resamplers keep no cache.
      if (component == Component::kUpsampler || component == Component::kDownsampler) continue;
      if (const void* model = ComponentModel(models, component); model != nullptr) {
        demand.needs.push_back({model, 2});
      }
    }
  }
  return demand;
}

}  // namespace mulo::engine
