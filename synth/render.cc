#include "synth/render.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// Built with -ffp-contract=off (see synth/BUILD): fusing a * b + c into one FMA would round
// differently from Python and flip pixels that sit exactly on a shape's edge.

namespace mulo::synth {
namespace {

// The background colours resolved once per image instead of once per pixel.
struct ResolvedBackground {
  BackgroundKind kind;
  Rgb c0;
  Rgb c1;
};

absl::StatusOr<ResolvedBackground> Resolve(const Background& background) {
  if (auto s = ValidateBackground(background); !s.ok()) return s;
  ResolvedBackground r{background.kind, *BackgroundColor(background.colors[0]), {}};
  r.c1 = background.colors.size() > 1 ? *BackgroundColor(background.colors[1]) : r.c0;
  return r;
}

// int(a + (b - a) * v + 0.5) with a, b Python ints: (b - a) * v is a double, and the
// truncation equals floor because the value is never negative.
int Mix(int a, int b, double v) { return static_cast<int>(a + (b - a) * v + 0.5); }

Rgb Pixel(const ResolvedBackground& bg, double u, double v) {
  switch (bg.kind) {
    case BackgroundKind::kSolid:
      return bg.c0;
    case BackgroundKind::kGradient:
      return {Mix(bg.c0.r, bg.c1.r, v), Mix(bg.c0.g, bg.c1.g, v), Mix(bg.c0.b, bg.c1.b, v)};
    case BackgroundKind::kStripes:
      break;
  }
  const int stripe = static_cast<int>(u * kStripes);
  return stripe % 2 == 0 ? bg.c0 : bg.c1;
}

void Put(cv::Mat& image, int x, int y, const Rgb& c) {
  auto& p = image.at<cv::Vec3b>(y, x);
  p[0] = static_cast<uchar>(c.r);  // RGB order
  p[1] = static_cast<uchar>(c.g);
  p[2] = static_cast<uchar>(c.b);
}

}  // namespace

bool Inside(Shape shape, double du, double dv, double h) {
  switch (shape) {
    case Shape::kCircle:
      return du * du + dv * dv <= h * h;
    case Shape::kSquare:
      return std::fabs(du) <= 0.85 * h && std::fabs(dv) <= 0.85 * h;
    case Shape::kDiamond:
      return std::fabs(du) + std::fabs(dv) <= h;
    case Shape::kTriangle:
      break;
  }
  return dv <= h && std::fabs(du) <= (dv + h) * 0.5;
}

std::pair<double, double> CellCenter(int cell) {
  const int row = cell / kGrid, col = cell % kGrid;
  return {(col + 0.5) / 3.0, (row + 0.5) / 3.0};
}

std::pair<double, double> ObjectCenter(const SceneObject& obj) {
  const auto [cx, cy] = CellCenter(obj.cell);
  return {cx + obj.jitter_x, cy + obj.jitter_y};
}

Rgb BackgroundPixel(const Background& background, double u, double v) {
  auto resolved = Resolve(background);
  if (!resolved.ok()) return {};
  return Pixel(*resolved, u, v);
}

absl::StatusOr<cv::Mat> Render(const Scene& scene, int size) {
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat("render size ", size, " < 1"));
  auto bg = Resolve(scene.background);
  if (!bg.ok()) return bg.status();
  struct Placed {
    Shape shape;
    double h, cx, cy;
    Rgb color;
  };
  std::vector<Placed> placed;
  for (const auto& obj : scene.objects) {
    auto color = ObjectColor(obj.color);
    if (!color)
      return absl::InvalidArgumentError(absl::StrCat("unknown object colour \"", obj.color, "\""));
    const auto [cx, cy] = ObjectCenter(obj);
    placed.push_back({obj.shape, HalfExtent(obj.size), cx, cy, *color});
  }
  cv::Mat image(size, size, CV_8UC3);
  for (int y = 0; y < size; ++y) {
    const double v = (y + 0.5) / size;
    for (int x = 0; x < size; ++x) {
      const double u = (x + 0.5) / size;
      Rgb pixel = Pixel(*bg, u, v);
      for (const auto& p : placed) {
        if (Inside(p.shape, u - p.cx, v - p.cy, p.h)) pixel = p.color;
      }
      Put(image, x, y, pixel);
    }
  }
  return image;
}

absl::StatusOr<cv::Mat> RenderBackground(const Background& background, int size) {
  Scene scene;
  scene.background = background;
  return Render(scene, size);
}

}  // namespace mulo::synth
