#include "engine/decode/mulo_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/model/json_fields.h"

namespace mulo::engine {
namespace {

constexpr DraftPrefix kPrefixes[] = {DraftPrefix::kDownsampled, DraftPrefix::kKeepDrafted,
                                     DraftPrefix::kPatch, DraftPrefix::kOwn};
constexpr ResampleOrder kResampleOrders[] = {ResampleOrder::kSequential, ResampleOrder::kParallel,
                                             ResampleOrder::kWavefront};
constexpr Pooling kPoolings[] = {Pooling::kAdditive, Pooling::kMultiplicative, Pooling::kNone};

// The one spelling of each enum value (the *Name functions), as JsonFields::Enum lists them.
template <typename E, size_t N, typename NameOf>
std::vector<std::string> Names(const E (&values)[N], NameOf name_of) {
  std::vector<std::string> names;
  for (E value : values) names.push_back(name_of(value));
  return names;
}

}  // namespace

const char* DraftPrefixName(DraftPrefix prefix) {
  switch (prefix) {
    case DraftPrefix::kDownsampled: return "downsampled";
    case DraftPrefix::kKeepDrafted: return "keep_drafted";
    case DraftPrefix::kPatch: return "patch";
    case DraftPrefix::kOwn: return "own";
  }
  return "unknown";
}

const char* ResampleOrderName(ResampleOrder order) {
  switch (order) {
    case ResampleOrder::kSequential: return "sequential";
    case ResampleOrder::kParallel: return "parallel";
    case ResampleOrder::kWavefront: return "wavefront";
  }
  return "unknown";
}

MuloOptions PaperMuloOptions() { return MuloOptions(); }

StatusOr<MuloOptions> ParseMuloOptions(const nlohmann::json& doc, MuloOptions o,
                                       const std::string& source) {
  JsonFields f(doc, source);
  if (!doc.is_object()) return f.Error("mulo", "must be an object");
  static const std::vector<std::string> kKeys = {
      "tau",       "k",           "delta",           "lambda",
      "pooling",   "radius",      "draft_rows",      "rejection",
      "draft_prefix", "resample",   "parallel_radius", "draft_cfg_scale",
      "draft_temperature", "zipar_window", "resample_window", "name", "calibration"};
  for (const auto& item : doc.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), item.key()) == kKeys.end()) {
      return f.Error(item.key(), "unknown option");
    }
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr int64_t kMaxInt = 1 << 20;
  MULO_ASSIGN_OR_RETURN(o.tau, f.Number("tau", 0.0, kInf, o.tau));
  MULO_ASSIGN_OR_RETURN(o.pooling.k, f.Int("k", 0, kMaxInt, o.pooling.k));
  MULO_ASSIGN_OR_RETURN(o.pooling.delta, f.Number("delta", 0.0, 1.0, o.pooling.delta));
  MULO_ASSIGN_OR_RETURN(o.pooling.lambda, f.Number("lambda", 1.0, 1e6, o.pooling.lambda));
  if (f.Has("pooling")) {
    MULO_ASSIGN_OR_RETURN(std::string name, f.Enum("pooling", Names(kPoolings, PoolingName)));
    MULO_ASSIGN_OR_RETURN(o.pooling.kind, ParsePooling(name, "pooling"));
  }
  MULO_ASSIGN_OR_RETURN(o.radius, f.Int("radius", 0, kMaxInt, o.radius));
  MULO_ASSIGN_OR_RETURN(o.draft_rows, f.Int("draft_rows", 1, kMaxInt, o.draft_rows));
  if (f.Has("rejection")) {
    MULO_ASSIGN_OR_RETURN(std::string name, f.Enum("rejection", {"local", "raster"}));
    o.rejection = name == "raster" ? Rejection::kRaster : Rejection::kLocal;
  }
  if (f.Has("draft_prefix")) {
    MULO_ASSIGN_OR_RETURN(std::string name,
                          f.Enum("draft_prefix", Names(kPrefixes, DraftPrefixName)));
    for (DraftPrefix p : kPrefixes) {
      if (name == DraftPrefixName(p)) o.prefix = p;
    }
  }
  if (f.Has("resample")) {
    MULO_ASSIGN_OR_RETURN(std::string name,
                          f.Enum("resample", Names(kResampleOrders, ResampleOrderName)));
    for (ResampleOrder r : kResampleOrders) {
      if (name == ResampleOrderName(r)) o.resample = r;
    }
  }
  MULO_ASSIGN_OR_RETURN(o.parallel_radius,
                        f.Int("parallel_radius", 0, kMaxInt, o.parallel_radius));
  MULO_ASSIGN_OR_RETURN(o.zipar_window, f.Int("zipar_window", 0, kMaxInt, o.zipar_window));
  MULO_ASSIGN_OR_RETURN(o.resample_window,
                        f.Int("resample_window", 1, kMaxInt, o.resample_window));
  if (f.Has("draft_cfg_scale")) {
    MULO_ASSIGN_OR_RETURN(o.draft_cfg_scale, f.Number("draft_cfg_scale", 0.0, 100.0, 1.0));
  }
  if (f.Has("draft_temperature")) {
    MULO_ASSIGN_OR_RETURN(o.draft_temperature, f.Number("draft_temperature", 0.0, 100.0, 1.0));
  }
  return o;
}

nlohmann::json MuloOptionsToJson(const MuloOptions& o) {
  nlohmann::json doc = {{"tau", o.tau},
                        {"pooling", PoolingName(o.pooling.kind)},
                        {"k", o.pooling.k},
                        {"delta", o.pooling.delta},
                        {"lambda", o.pooling.lambda},
                        {"radius", o.radius},
                        {"draft_rows", o.draft_rows},
                        {"rejection", o.rejection == Rejection::kRaster ? "raster" : "local"},
                        {"draft_prefix", DraftPrefixName(o.prefix)},
                        {"resample", ResampleOrderName(o.resample)},
                        {"parallel_radius", o.parallel_radius},
                        {"zipar_window", o.zipar_window},
                        {"resample_window", o.resample_window}};
  if (o.draft_cfg_scale) doc["draft_cfg_scale"] = *o.draft_cfg_scale;
  if (o.draft_temperature) doc["draft_temperature"] = *o.draft_temperature;
  return doc;
}

StatusOr<MuloOptions> FamilyMuloOptions(const ModelSet& models) {
  if (!models.method_defaults.contains("mulo")) return PaperMuloOptions();
  return ParseMuloOptions(models.method_defaults["mulo"], PaperMuloOptions(),
                          models.name + " family.json method_defaults.mulo");
}

Status ValidateMuloOptions(const MuloOptions& o) {
  if (!(o.tau >= 0.0) || !std::isfinite(o.tau)) {
    return InvalidArgumentError("mulo.tau: must be a finite number >= 0");
  }
  MULO_RETURN_IF_ERROR(o.pooling.Validate("mulo"));
  if (o.radius < 0) return InvalidArgumentError("mulo.radius: must be >= 0");
  if (o.draft_rows < 1) return InvalidArgumentError("mulo.draft_rows: must be >= 1");
  if (o.parallel_radius < 0) {
    return InvalidArgumentError("mulo.parallel_radius: must be >= 0");
  }
  if (o.zipar_window < 0) return InvalidArgumentError("mulo.zipar_window: must be >= 0");
  if (o.resample_window < 1) return InvalidArgumentError("mulo.resample_window: must be >= 1");
  if (o.draft_cfg_scale &&
      !(*o.draft_cfg_scale >= 0.0 && *o.draft_cfg_scale <= 100.0)) {
    return InvalidArgumentError("mulo.draft_cfg_scale: must be in [0, 100]");
  }
  if (o.draft_temperature &&
      !(*o.draft_temperature >= 0.0 && *o.draft_temperature <= 100.0)) {
    return InvalidArgumentError("mulo.draft_temperature: must be in [0, 100]");
  }
  return OkStatus();
}

}  // namespace mulo::engine
