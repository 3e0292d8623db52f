// The vocabulary of the synth domain (tools/synth/domain.py): colours, shapes, sizes, cell
// positions and background kinds, with the exact numbers the Python definition uses.
//
// Colours are looked up by name because a name means different RGB values depending on its
// role: "red" as an object is (220, 30, 30), "red" as a background is the lightened
// (234, 120, 120). Tables keep domain.py's order so iteration matches the Python dicts.
#ifndef MULO_SYNTH_PALETTE_H_
#define MULO_SYNTH_PALETTE_H_

#include <array>
#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace mulo::synth {

struct Rgb {
  int r = 0;
  int g = 0;
  int b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

struct NamedColor {
  absl::string_view name;
  Rgb rgb;
};

// domain._lighten: round(0.6 c + 0.4 * 255) in exact integer arithmetic.
constexpr int Lighten(int c) { return (3 * c + 2 * 255 + 2) / 5; }
constexpr Rgb Lighten(Rgb c) { return {Lighten(c.r), Lighten(c.g), Lighten(c.b)}; }

// domain.OBJECT_COLORS: saturated, pairwise >= 96 apart (RGB Euclidean).
inline constexpr std::array<NamedColor, 8> kObjectColors = {{
    {"red", {220, 30, 30}},
    {"orange", {245, 130, 20}},
    {"yellow", {245, 225, 40}},
    {"green", {30, 160, 50}},
    {"cyan", {30, 200, 220}},
    {"blue", {30, 60, 220}},
    {"purple", {140, 50, 200}},
    {"pink", {235, 60, 190}},
}};

// domain.BACKGROUND_COLORS: the object hues lightened 60:40 with white, then the neutrals.
inline constexpr std::array<NamedColor, 11> kBackgroundColors = {{
    {"red", Lighten(Rgb{220, 30, 30})},
    {"orange", Lighten(Rgb{245, 130, 20})},
    {"yellow", Lighten(Rgb{245, 225, 40})},
    {"green", Lighten(Rgb{30, 160, 50})},
    {"cyan", Lighten(Rgb{30, 200, 220})},
    {"blue", Lighten(Rgb{30, 60, 220})},
    {"purple", Lighten(Rgb{140, 50, 200})},
    {"pink", Lighten(Rgb{235, 60, 190})},
    {"black", {30, 30, 30}},
    {"white", {245, 245, 245}},
    {"gray", {128, 128, 128}},
}};

enum class Shape { kCircle, kSquare, kTriangle, kDiamond };
inline constexpr std::array<Shape, 4> kShapes = {Shape::kCircle, Shape::kSquare, Shape::kTriangle,
                                                 Shape::kDiamond};

enum class Size { kSmall, kLarge };
inline constexpr std::array<Size, 2> kSizes = {Size::kSmall, Size::kLarge};

enum class BackgroundKind { kSolid, kGradient, kStripes };

// domain.STRIPES: vertical stripes across the image; stripe 0 (leftmost) takes colour 0.
inline constexpr int kStripes = 8;
// domain.JITTER: max offset of an object's centre from its cell centre (image widths).
inline constexpr double kJitter = 0.015;
// The scene grid is 3 x 3 cells; cell = row * 3 + col.
inline constexpr int kGrid = 3;
inline constexpr int kCells = kGrid * kGrid;

// domain.POSITIONS, indexed by cell.
inline constexpr std::array<absl::string_view, kCells> kPositions = {
    "top left",     "top middle",  "top right",     "middle left",  "center",
    "middle right", "bottom left", "bottom middle", "bottom right",
};

// domain.SIZES: half-extent in image widths.
constexpr double HalfExtent(Size size) { return size == Size::kSmall ? 0.09 : 0.15; }

std::optional<Rgb> ObjectColor(absl::string_view name);
std::optional<Rgb> BackgroundColor(absl::string_view name);

absl::string_view ShapeName(Shape shape);
std::optional<Shape> ShapeFromName(absl::string_view name);
absl::string_view SizeName(Size size);
std::optional<Size> SizeFromName(absl::string_view name);
absl::string_view KindName(BackgroundKind kind);
std::optional<BackgroundKind> KindFromName(absl::string_view name);
// "top left" for cell 0 ...; "?" for a cell outside 0..8.
absl::string_view PositionName(int cell);

// Squared RGB Euclidean distance.
inline double Distance2(double r, double g, double b, const Rgb& c) {
  const double dr = r - c.r, dg = g - c.g, db = b - c.b;
  return dr * dr + dg * dg + db * db;
}

// The palette entry nearest to (r, g, b); ties go to the earlier entry.
template <size_t N>
const NamedColor& Nearest(const std::array<NamedColor, N>& palette, double r, double g, double b) {
  size_t best = 0;
  for (size_t i = 1; i < N; ++i) {
    if (Distance2(r, g, b, palette[i].rgb) < Distance2(r, g, b, palette[best].rgb)) best = i;
  }
  return palette[best];
}

}  // namespace mulo::synth

#endif  // MULO_SYNTH_PALETTE_H_
