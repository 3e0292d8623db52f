#include "synth/palette.h"

namespace mulo::synth {
namespace {

template <size_t N>
std::optional<Rgb> Find(const std::array<NamedColor, N>& palette, absl::string_view name) {
  for (const auto& c : palette) {
    if (c.name == name) return c.rgb;
  }
  return std::nullopt;
}

constexpr std::array<absl::string_view, 4> kShapeNames = {"circle", "square", "triangle",
                                                          "diamond"};
constexpr std::array<absl::string_view, 2> kSizeNames = {"small", "large"};
constexpr std::array<absl::string_view, 3> kKindNames = {"solid", "gradient", "stripes"};

template <typename Enum, size_t N>
std::optional<Enum> FromName(const std::array<absl::string_view, N>& names,
                             absl::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Rgb> ObjectColor(absl::string_view name) { return Find(kObjectColors, name); }
std::optional<Rgb> BackgroundColor(absl::string_view name) { return Find(kBackgroundColors, name); }

absl::string_view ShapeName(Shape shape) { return kShapeNames[static_cast<int>(shape)]; }
std::optional<Shape> ShapeFromName(absl::string_view name) {
  return FromName<Shape>(kShapeNames, name);
}
absl::string_view SizeName(Size size) { return kSizeNames[static_cast<int>(size)]; }
std::optional<Size> SizeFromName(absl::string_view name) {
  return FromName<Size>(kSizeNames, name);
}
absl::string_view KindName(BackgroundKind kind) { return kKindNames[static_cast<int>(kind)]; }
std::optional<BackgroundKind> KindFromName(absl::string_view name) {
  return FromName<BackgroundKind>(kKindNames, name);
}

absl::string_view PositionName(int cell) {
  if (cell < 0 || cell >= kCells) return "?";
  return kPositions[cell];
}

}  // namespace mulo::synth
