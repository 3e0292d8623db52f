#include "synth/scene.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mulo::synth {

absl::Status ValidateBackground(const Background& background) {
  const size_t want = background.kind == BackgroundKind::kSolid ? 1 : 2;
  if (background.colors.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", KindName(background.kind), " background needs ", want, " colour",
                     want == 1 ? "" : "s", ", got ", background.colors.size()));
  }
  for (const auto& c : background.colors) {
    if (!BackgroundColor(c)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown background colour \"", c, "\""));
    }
  }
  return absl::OkStatus();
}

namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("scene ", where, ": ", what));
}

absl::StatusOr<std::string> StringField(const json& obj, const char* key, absl::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end()) return Invalid(where, absl::StrCat("missing \"", key, "\""));
  if (!it->is_string()) return Invalid(where, absl::StrCat("\"", key, "\" is not a string"));
  return it->get<std::string>();
}

absl::StatusOr<SceneObject> ObjectFromJson(const json& j, size_t index) {
  const std::string where = absl::StrCat("objects[", index, "]");
  if (!j.is_object()) return Invalid(where, "is not an object");
  SceneObject obj;

  auto color = StringField(j, "color", where);
  if (!color.ok()) return color.status();
  if (!ObjectColor(*color))
    return Invalid(where, absl::StrCat("unknown object colour \"", *color, "\""));
  obj.color = *color;

  auto shape = StringField(j, "shape", where);
  if (!shape.ok()) return shape.status();
  auto s = ShapeFromName(*shape);
  if (!s) return Invalid(where, absl::StrCat("unknown shape \"", *shape, "\""));
  obj.shape = *s;

  auto size = StringField(j, "size", where);
  if (!size.ok()) return size.status();
  auto z = SizeFromName(*size);
  if (!z) return Invalid(where, absl::StrCat("unknown size \"", *size, "\""));
  obj.size = *z;

  auto cell = j.find("cell");
  if (cell == j.end() || !cell->is_number_integer()) {
    return Invalid(where, "\"cell\" must be an integer");
  }
  const int64_t c = cell->get<int64_t>();
  if (c < 0 || c >= kCells) return Invalid(where, absl::StrCat("cell ", c, " is not in 0..8"));
  obj.cell = static_cast<int>(c);

  // Jitter is optional (a scene written by hand may leave it out); when present it must be
  // two numbers. Values are kept exactly as parsed: rendering parity depends on it.
  auto jitter = j.find("jitter");
  if (jitter != j.end()) {
    if (!jitter->is_array() || jitter->size() != 2 || !(*jitter)[0].is_number() ||
        !(*jitter)[1].is_number()) {
      return Invalid(where, "\"jitter\" must be [dx, dy]");
    }
    obj.jitter_x = (*jitter)[0].get<double>();
    obj.jitter_y = (*jitter)[1].get<double>();
  }
  return obj;
}

absl::StatusOr<Background> BackgroundFromJsonImpl(const json& j) {
  if (!j.is_object()) return Invalid("background", "is not an object");
  Background bg;
  auto kind = StringField(j, "kind", "background");
  if (!kind.ok()) return kind.status();
  auto k = KindFromName(*kind);
  if (!k) return Invalid("background", absl::StrCat("unknown kind \"", *kind, "\""));
  bg.kind = *k;
  auto colors = j.find("colors");
  if (colors == j.end() || !colors->is_array()) {
    return Invalid("background", "\"colors\" must be a list");
  }
  for (const auto& c : *colors) {
    if (!c.is_string()) return Invalid("background", "colours must be strings");
    bg.colors.push_back(c.get<std::string>());
  }
  if (auto s = ValidateBackground(bg); !s.ok()) return Invalid("background", s.message());
  return bg;
}

absl::StatusOr<Scene> SceneFromJsonImpl(const json& j) {
  if (!j.is_object()) return Invalid("", "is not a JSON object");
  Scene scene;
  auto bg = j.find("background");
  if (bg == j.end()) return Invalid("", "missing \"background\"");
  auto background = BackgroundFromJsonImpl(*bg);
  if (!background.ok()) return background.status();
  scene.background = *std::move(background);

  auto objects = j.find("objects");
  if (objects == j.end() || !objects->is_array()) {
    return Invalid("", "\"objects\" must be a list");
  }
  for (size_t i = 0; i < objects->size(); ++i) {
    auto obj = ObjectFromJson((*objects)[i], i);
    if (!obj.ok()) return obj.status();
    scene.objects.push_back(*std::move(obj));
  }

  auto tmpl = j.find("template");
  if (tmpl != j.end()) {
    if (!tmpl->is_number_integer()) return Invalid("", "\"template\" must be an integer");
    scene.template_index = tmpl->get<int>();
  }

  scene.size_mentioned.assign(scene.objects.size(), true);
  auto mentioned = j.find("size_mentioned");
  if (mentioned != j.end()) {
    if (!mentioned->is_array() || mentioned->size() != scene.objects.size()) {
      return Invalid("", "\"size_mentioned\" must hold one boolean per object");
    }
    for (size_t i = 0; i < mentioned->size(); ++i) {
      if (!(*mentioned)[i].is_boolean()) {
        return Invalid("", "\"size_mentioned\" must hold booleans");
      }
      scene.size_mentioned[i] = (*mentioned)[i].get<bool>();
    }
  }
  return scene;
}

}  // namespace

// The fields are checked before every access, but nlohmann can still throw (for example on
// an integer out of range); no exception may cross this API.
absl::StatusOr<Background> BackgroundFromJson(const json& j) {
  try {
    return BackgroundFromJsonImpl(j);
  } catch (const json::exception& e) {
    return Invalid("background", e.what());
  }
}

absl::StatusOr<Scene> SceneFromJson(const json& j) {
  try {
    return SceneFromJsonImpl(j);
  } catch (const json::exception& e) {
    return Invalid("", e.what());
  }
}

absl::StatusOr<Scene> ParseScene(absl::string_view json_text) {
  // allow_exceptions = false: malformed text gives a discarded value instead of throwing.
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("scene: malformed JSON");
  return SceneFromJson(j);
}

std::string DescribeBackground(const Background& background) {
  const auto& c = background.colors;
  auto at = [&](size_t i) { return i < c.size() ? c[i] : std::string("?"); };
  switch (background.kind) {
    case BackgroundKind::kSolid:
      return absl::StrCat(at(0), " background");
    case BackgroundKind::kGradient:
      return absl::StrCat(at(0), " to ", at(1), " gradient");
    case BackgroundKind::kStripes:
      break;
  }
  return absl::StrCat(at(0), " and ", at(1), " stripes");
}

}  // namespace mulo::synth
