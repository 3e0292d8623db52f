// Scenes of the synth domain and their JSON form (tools/synth/domain.py, sample_scene):
//
//   {"background": {"kind": "solid" | "gradient" | "stripes", "colors": [name, ...]},
//    "objects": [{"color", "shape", "size", "cell": 0..8, "jitter": [dx, dy]}, ...],
//    "template": 0..3, "size_mentioned": [bool, ...]}
//
// Parsing validates every name against the palette, so a Scene that parsed can be rendered.
#ifndef MULO_SYNTH_SCENE_H_
#define MULO_SYNTH_SCENE_H_

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "synth/palette.h"

namespace mulo::synth {

struct Background {
  BackgroundKind kind = BackgroundKind::kSolid;
  // Background colour names: one for solid; two otherwise (gradient: top then bottom;
  // stripes: even stripes, counting from 0 at the left, then odd stripes).
  std::vector<std::string> colors;
};

struct SceneObject {
  std::string color;  // an object colour name
  Shape shape = Shape::kCircle;
  Size size = Size::kSmall;
  int cell = 0;  // row * 3 + col
  // Offset of the centre from the cell centre, in image widths (|d| <= kJitter in the domain).
  double jitter_x = 0.0;
  double jitter_y = 0.0;
};

struct Scene {
  Background background;
  // Painted in order: a later object covers an earlier one.
  std::vector<SceneObject> objects;
  int template_index = 0;            // which caption paraphrase (domain.TEMPLATES)
  std::vector<bool> size_mentioned;  // one per object; all true when the JSON omits it
};

// "red background" / "red to blue gradient" / "red and blue stripes" (the caption phrase).
std::string DescribeBackground(const Background& background);

// Checks the background's kind/colour count and that every colour is a background colour.
absl::Status ValidateBackground(const Background& background);

// Parses and validates a scene object. Errors are InvalidArgument naming the field.
absl::StatusOr<Scene> SceneFromJson(const nlohmann::json& json);
absl::StatusOr<Background> BackgroundFromJson(const nlohmann::json& json);
// The same from JSON text.
absl::StatusOr<Scene> ParseScene(absl::string_view json_text);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_SCENE_H_
