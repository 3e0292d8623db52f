#include "engine/model/model_set.h"

#include <algorithm>
#include <iterator>

#include "engine/core/device_stream.h"
#include "engine/model/condition_stages.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

constexpr int64_t kMaxPooledNeighbors = 1000;

// Checks that an AR model reads the conditioner's features and writes the VQ's tokens.
Status CheckArModel(const std::string& role, const TokenModel& model, const ModelSet& set) {
  const ConditionShape& c = model.condition_shape();
  if (model.vocab_size() != set.vq->config().codebook_size) {
    return FailedPreconditionError(role + ": vocab_size " + std::to_string(model.vocab_size()) +
                                   " != VQ codebook_size " +
                                   std::to_string(set.vq->config().codebook_size));
  }
  if (set.conditioner != nullptr) {
    const auto& t = set.conditioner->config();
    if (c.mode != ConditionMode::kClipCond || c.width != t.dim || c.rows != t.max_tokens) {
      return FailedPreconditionError(role + ": expects clip_cond features [" +
                                     std::to_string(c.rows) + ", " + std::to_string(c.width) +
                                     "], the conditioner gives [" + std::to_string(t.max_tokens) +
                                     ", " + std::to_string(t.dim) + "]");
    }
  }
  return OkStatus();
}

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
  const auto& components = doc["components"];
  // A key the loader does not know would be ignored, and its component silently missing.
  static const char* const kKnown[] = {"target",  "vq",     "conditioner", "drafter",
                                       "chain",   "upsampler", "downsampler", "eagle",
                                       "ta_tok",  "mllm",   "t5"};
  for (const auto& item : components.items()) {
    const bool known = std::any_of(std::begin(kKnown), std::end(kKnown),
                                   [&](const char* k) { return item.key() == k; });
    if (!known) {
      return f.Error("components." + item.key(),
                     "unknown component (known: target, vq, conditioner, drafter, chain, "
                     "upsampler, downsampler, eagle, ta_tok, mllm, t5)");
    }
    if (!item.value().is_string()) {
      return f.Error("components." + item.key(), "must be a directory name (a string)");
    }
  }
  auto component = [&](const std::string& key) -> std::string {
    return components.contains(key) && components[key].is_string()
               ? dir + "/" + components[key].get<std::string>()
               : std::string();
  };
  if (component("target").empty()) return f.Error("components.target", "missing");
  if (component("vq").empty()) return f.Error("components.vq", "missing");
  // The image grid of a target that has none of its own (a language model such as Janus-Pro);
  // 0: the target's own.
  MULO_ASSIGN_OR_RETURN(const int64_t grid_size, f.Int("grid_size", 0, 1024, 0));
  MULO_ASSIGN_OR_RETURN(set.target, LoadTokenModel({component("target"), options, grid_size}));
  MULO_ASSIGN_OR_RETURN(set.vq, VqDecoder::LoadDirectory(component("vq"), options));
  if (!component("conditioner").empty()) {
    MULO_ASSIGN_OR_RETURN(set.conditioner,
                          TextConditioner::LoadDirectory(component("conditioner"), options));
  }
  MULO_RETURN_IF_ERROR(CheckArModel("target", *set.target, set));
  std::vector<std::shared_ptr<const Conditioner>> conditioners;
  if (set.conditioner != nullptr) conditioners.push_back(TextEncoderStage(set.conditioner));
  if (!component("t5").empty()) {
    MULO_ASSIGN_OR_RETURN(std::shared_ptr<const T5Encoder> t5,
                          T5Encoder::LoadDirectory(component("t5"), options));
    const ConditionShape& c = set.target->condition_shape();
    if (c.mode != ConditionMode::kCaption || c.width != t5->config().d_model) {
      return FailedPreconditionError(
          "t5: the encoder's features are " + std::to_string(t5->config().d_model) +
          " wide; the target needs caption features (cls_embedding.cap_proj) of that width, "
          "it reads " + std::to_string(c.width));
    }
    conditioners.push_back(T5CaptionStage(std::move(t5), c.rows));
  }
  if (!component("ta_tok").empty()) {
    MULO_ASSIGN_OR_RETURN(set.ta_tok,
                          TaTokDequantizer::LoadDirectory(component("ta_tok"), options));
    const ConditionShape& t = set.target->condition_shape();
    if (t.mode != ConditionMode::kClipCond || t.width != set.ta_tok->config().hidden ||
        !TaTokDequantizer::IsSquare(t.rows)) {
      return FailedPreconditionError(
          "ta_tok: the de-quantiser's [n, " + std::to_string(set.ta_tok->config().hidden) +
          "] features do not fit the target's condition (clip_cond [" + std::to_string(t.rows) +
          ", " + std::to_string(t.width) + "] with a square count expected)");
    }
  }
  if (!component("mllm").empty()) {
    if (set.ta_tok == nullptr) {
      return f.Error("components.mllm", "needs components.ta_tok: the MLLM writes TA-Tok ids");
    }
    // The MLLM writes exactly the target's condition rows: a square of them (729 = 27^2 for
    // Tar's scale 0, 169 and 81 for 1 and 2).
    const int64_t rows = set.target->condition_shape().rows;
    int64_t grid = 1;
    while (grid * grid < rows) ++grid;
    auto stage = std::make_shared<ModelSet>();
    stage->name = set.name + "/mllm";
    stage->default_cfg_scale = 1.0;
    MULO_ASSIGN_OR_RETURN(stage->target, LoadTokenModel({component("mllm"), options, grid}));
    if (stage->target->condition_shape().mode != ConditionMode::kPromptIds) {
      return f.Error("components.mllm",
                     "is a " + stage->target->architecture() + " model, which reads no prompt");
    }
    if (stage->target->vocab_size() != set.ta_tok->config().codebook_size) {
      return FailedPreconditionError("mllm: " + std::to_string(stage->target->vocab_size()) +
                                     " image tokens, the ta_tok codebook has " +
                                     std::to_string(set.ta_tok->config().codebook_size));
    }
    set.mllm_stage = std::move(stage);
    conditioners.push_back(MllmStage(set.mllm_stage));
  }
  if (set.ta_tok != nullptr) {
    conditioners.push_back(TaTokStage(set.ta_tok, set.target->condition_shape().rows));
  }
  MULO_RETURN_IF_ERROR(BuildPipeline(doc, f, conditioners, set));
  for (auto [key, slot] : {std::pair{"drafter", &set.drafter}, std::pair{"chain", &set.chain}}) {
    if (component(key).empty()) continue;
    MULO_ASSIGN_OR_RETURN(*slot, LoadTokenModel({component(key), options}));
    MULO_RETURN_IF_ERROR(CheckArModel(key, **slot, set));
  }
  for (auto [key, slot] :
       {std::pair{"upsampler", &set.upsampler}, std::pair{"downsampler", &set.downsampler}}) {
    if (component(key).empty()) continue;
    MULO_ASSIGN_OR_RETURN(*slot, Resampler::LoadDirectory(component(key), options));
    if ((*slot)->config().codebook_size != set.vq->config().codebook_size) {
      return FailedPreconditionError(std::string(key) + ": codebook size differs from the VQ's");
    }
  }
  if (set.drafter != nullptr && set.upsampler != nullptr &&
      set.drafter->grid_size() * set.upsampler->config().factor != set.target->grid_size()) {
    return FailedPreconditionError("drafter grid x up-sampling factor != target grid");
  }
  // Up to 1000 neighbours per entry (the papers' k), computed once for every request.
  set.neighbors = std::make_shared<const LatentNeighbors>(
      LatentNeighbors::Build(set.vq->raw_codebook(), kMaxPooledNeighbors));
  if (!component("eagle").empty()) {
    MULO_ASSIGN_OR_RETURN(set.eagle,
                          EagleHead::LoadDirectory(component("eagle"), *set.target, options));
  }
  set.weight_bytes = *options.loaded_bytes + static_cast<int64_t>(set.neighbors->table().nbytes());
  if (caller_options.loaded_bytes) *caller_options.loaded_bytes += set.weight_bytes;
  // The weights' copies and casts ran on this thread's stream; workers read them from streams
  // of their own, which do not wait for it.
  WaitForThisThread(options.device);
  return set;
}

}  // namespace mulo::engine
