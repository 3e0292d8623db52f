#include "engine/model/model_set.h"

#include "engine/core/device_stream.h"
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
  auto component = [&](const std::string& key) -> std::string {
    return components.contains(key) && components[key].is_string()
               ? dir + "/" + components[key].get<std::string>()
               : std::string();
  };
  if (component("target").empty()) return f.Error("components.target", "missing");
  if (component("vq").empty()) return f.Error("components.vq", "missing");
  MULO_ASSIGN_OR_RETURN(set.target, LoadTokenModel({component("target"), options}));
  MULO_ASSIGN_OR_RETURN(set.vq, VqDecoder::LoadDirectory(component("vq"), options));
  if (!component("conditioner").empty()) {
    MULO_ASSIGN_OR_RETURN(set.conditioner,
                          TextConditioner::LoadDirectory(component("conditioner"), options));
  }
  MULO_RETURN_IF_ERROR(CheckArModel("target", *set.target, set));
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
  }
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
