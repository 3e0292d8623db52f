#include "engine/model/model_set.h"

#include <algorithm>
#include <iterator>

#include "engine/core/device_stream.h"
#include "engine/model/family_components.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

constexpr int64_t kMaxPooledNeighbors = 1000;

}  // namespace

int64_t ModelSet::ImageSize() const {
  return target->grid_size() * vq->config().downsample_factor();
}

const Conditioner* ModelSet::StageReading(ConditionForm form) const {
  for (const auto& stage : pipeline) {
    if (stage->input() == form) return stage.get();
  }
  return nullptr;
}

namespace {

// family.json "pipeline" (or the order the loaded conditioners imply) as a chain of stages
// that ends in the target's features.
Status BuildPipeline(const nlohmann::json& doc, const JsonFields& f,
                     const std::vector<std::shared_ptr<const Conditioner>>& loaded,
                     ModelSet& set) {
  if (!doc.contains("pipeline")) {
    set.pipeline = loaded;  // loaded in reading order: conditioner, t5, mllm, ta_tok
  } else {
    if (!doc["pipeline"].is_array()) {
      return f.Error("pipeline", "must be a list of component names, e.g. [\"mllm\", \"ta_tok\"]");
    }
    for (const auto& entry : doc["pipeline"]) {
      auto it = std::find_if(loaded.begin(), loaded.end(), [&](const auto& stage) {
        return entry.is_string() && stage->name() == entry.get<std::string>();
      });
      if (it == loaded.end()) {
        return f.Error("pipeline", entry.dump() +
                                       " is not a loaded conditioner (conditioner, t5, mllm or "
                                       "ta_tok, named in components)");
      }
      set.pipeline.push_back(*it);
    }
  }
  for (size_t i = 0; i < set.pipeline.size(); ++i) {
    const ConditionForm want = i + 1 < set.pipeline.size() ? set.pipeline[i + 1]->input()
                                                           : ConditionForm::kFeatures;
    if (set.pipeline[i]->output() != want) {
      return f.Error("pipeline", set.pipeline[i]->name() + " writes " +
                                     ConditionFormField(set.pipeline[i]->output()) + ", " +
                                     (i + 1 < set.pipeline.size()
                                          ? set.pipeline[i + 1]->name() + " reads "
                                          : std::string("the target reads ")) +
                                     ConditionFormField(want));
    }
  }
  return OkStatus();
}

// Every component family.json names, through its row of FamilyComponents(), then the
// pipeline the loaded conditioners make.
Status LoadComponents(const std::string& dir, const nlohmann::json& doc, const JsonFields& f,
                      const LoadOptions& options, ModelSet& set) {
  const nlohmann::json& components = doc["components"];
  const std::vector<FamilyComponent>& rows = FamilyComponents();
  // A key the loader does not know would be ignored, and its component silently missing.
  for (const auto& item : components.items()) {
    if (std::none_of(rows.begin(), rows.end(),
                     [&](const FamilyComponent& row) { return item.key() == row.key; })) {
      return f.Error("components." + item.key(),
                     "unknown component (known: " + FamilyComponentKeys() + ")");
    }
    if (!item.value().is_string()) {
      return f.Error("components." + item.key(), "must be a directory name (a string)");
    }
  }
  for (const FamilyComponent& row : rows) {
    if (row.required && !components.contains(row.key)) {
      return f.Error(std::string("components.") + row.key, "missing");
    }
  }
  // The image grid of a target that has none of its own (a language model such as Janus-Pro);
  // 0: the target's own.
  MULO_ASSIGN_OR_RETURN(const int64_t grid_size, f.Int("grid_size", 0, 1024, 0));
  std::vector<std::shared_ptr<const Conditioner>> conditioners;
  for (const FamilyComponent& row : rows) {
    if (!components.contains(row.key)) continue;
    ComponentLoad load{dir + "/" + components[row.key].get<std::string>(),
                       options,
                       f,
                       grid_size,
                       set,
                       conditioners};
    MULO_RETURN_IF_ERROR(row.load(load));
  }
  return BuildPipeline(doc, f, conditioners, set);
}

}  // namespace

StatusOr<ModelSet> LoadModelSet(const std::string& dir, const LoadOptions& caller_options) {
  LoadOptions options = caller_options;
  options.loaded_bytes = std::make_shared<std::atomic<int64_t>>(0);
  const std::string path = dir + "/family.json";
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  ModelSet set;
  set.name = doc.value("name", std::string());
  if (set.name.empty()) return f.Error("name", "missing");
  MULO_ASSIGN_OR_RETURN(set.default_cfg_scale, f.Number("default_cfg_scale", 0.0, 100.0, 4.0));
  if (f.Has("pixel_rounding")) {
    MULO_ASSIGN_OR_RETURN(std::string rounding, f.Enum("pixel_rounding", {"round", "truncate"}));
    set.pixel_rounding =
        rounding == "truncate" ? PixelRounding::kTruncate : PixelRounding::kNearest;
  }
  if (doc.contains("method_defaults")) {
    if (!doc["method_defaults"].is_object()) {
      return f.Error("method_defaults", "must be an object of method name -> options");
    }
    set.method_defaults = doc["method_defaults"];
  }
  if (!doc.contains("components") || !doc["components"].is_object()) {
    return f.Error("components", "missing (an object of component -> directory)");
  }
  MULO_RETURN_IF_ERROR(LoadComponents(dir, doc, f, options, set));
  // Up to 1000 neighbours per entry (the papers' k), computed once for every request.
  set.neighbors = std::make_shared<const LatentNeighbors>(
      LatentNeighbors::Build(set.vq->raw_codebook(), kMaxPooledNeighbors));
  set.weight_bytes = *options.loaded_bytes + static_cast<int64_t>(set.neighbors->table().nbytes());
  if (caller_options.loaded_bytes) *caller_options.loaded_bytes += set.weight_bytes;
  // The weights' copies and casts ran on this thread's stream; workers read them from streams
  // of their own, which do not wait for it.
  WaitForThisThread(options.device);
  return set;
}

}  // namespace mulo::engine
