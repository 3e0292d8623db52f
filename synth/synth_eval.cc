#include "synth/synth_eval.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "synth/object_probe.h"
#include "synth/palette.h"
#include "synth/render.h"

namespace mulo::synth {
namespace {

// Pixels of column (or row) `index` of the 3 x 3 grid: those whose centre (x + 0.5) / n lies
// in [index / 3, (index + 1) / 3), as [begin, end).
std::pair<int, int> GridSpan(int index, int n) {
  auto first = [n](int k) { return static_cast<int>(std::ceil(k * n / 3.0 - 0.5)); };
  return {first(index), first(index + 1)};
}

cv::Rect CellRect(int cell, int n) {
  const auto [x0, x1] = GridSpan(cell % kGrid, n);
  const auto [y0, y1] = GridSpan(cell / kGrid, n);
  return {x0, y0, x1 - x0, y1 - y0};
}

// The rectangle grown (or, for negative `by`, shrunk) on every side, clipped to the image.
cv::Rect Grow(const cv::Rect& r, int by, int n) {
  cv::Rect g(r.x - by, r.y - by, r.width + 2 * by, r.height + 2 * by);
  if (g.width <= 0 || g.height <= 0) return {};
  return g & cv::Rect(0, 0, n, n);
}

void Fail(Verdict& v, bool Verdict::*attribute, std::string reason) {
  v.*attribute = false;
  v.reasons.push_back(std::move(reason));
}

std::string Describe(const ObjectClaim& claim) {
  std::string s = claim.size ? absl::StrCat(SizeName(*claim.size), " ") : std::string();
  absl::StrAppend(&s, claim.color, " ", ShapeName(claim.shape));
  return s;
}

// Why `rgb` and `claims` cannot be judged at all, or "".
std::string UnusableReason(const CaptionClaims& claims, const cv::Mat& rgb,
                           const SynthEvalOptions& options) {
  if (rgb.empty()) return "image is empty";
  if (rgb.type() != CV_8UC3) {
    return absl::StrCat("image must be 8-bit RGB (CV_8UC3), got ", rgb.channels(),
                        " channel(s) of depth ", rgb.depth());
  }
  if (rgb.rows != rgb.cols)
    return absl::StrCat("image must be square, got ", rgb.cols, "x", rgb.rows);
  if (rgb.rows < options.min_image_size) {
    return absl::StrCat("image is ", rgb.rows, "x", rgb.cols, ", smaller than ",
                        options.min_image_size, "x", options.min_image_size);
  }
  if (!ValidateBackground(claims.background).ok() || claims.objects.empty()) {
    return "claims are incomplete (no valid background or no object)";
  }
  return "";
}

// The shape fits best among all shapes (within the slack), and so does the size when claimed.
void JudgeShapeAndSize(Verdict& v, ObjectReport& report, const ObjectProbe& probe,
                       const std::string& what, int n, const SynthEvalOptions& options) {
  const ObjectClaim& claim = report.claim;
  report.fit = FitShapes(probe.mask, probe.region.tl(), n, report.centroid, options.shape_fit);
  const ShapeFit& fit = report.fit;
  const double claimed_shape_iou = fit.BestForShape(claim.shape);
  double best_shape_iou = 0.0;
  for (Shape s : kShapes) best_shape_iou = std::max(best_shape_iou, fit.BestForShape(s));
  bool shape_ok = true;
  if (fit.best_iou < options.min_shape_iou) {
    shape_ok = false;
    Fail(v, &Verdict::shape,
         absl::StrFormat("shape: the %s matches no shape (best IoU %.2f for a %s)", what,
                         fit.best_iou, ShapeName(fit.best_shape)));
  } else if (claimed_shape_iou < best_shape_iou - options.iou_slack) {
    shape_ok = false;
    Fail(v, &Verdict::shape,
         absl::StrFormat("shape: the %s looks like a %s (IoU %.2f vs %.2f)", what,
                         ShapeName(fit.best_shape), best_shape_iou, claimed_shape_iou));
  }
  if (claim.size) {
    const Shape shape = shape_ok ? claim.shape : fit.best_shape;
    const double claimed_size_iou = fit.Iou(shape, *claim.size);
    const Size other = *claim.size == Size::kSmall ? Size::kLarge : Size::kSmall;
    const double other_iou = fit.Iou(shape, other);
    if (claimed_size_iou < other_iou - options.iou_slack) {
      Fail(v, &Verdict::size,
           absl::StrFormat("size: the %s looks %s (IoU %.2f vs %.2f)", what, SizeName(other),
                           other_iou, claimed_size_iou));
    }
  }
}

// A cell nobody claimed holding enough foreground fails the position attribute.
void FlagUnclaimedObjects(Verdict& v, const std::array<bool, kCells>& claimed,
                          const cv::Mat& foreground, int n, const SynthEvalOptions& options) {
  for (int cell = 0; cell < kCells; ++cell) {
    if (claimed[cell]) continue;
    const cv::Rect interior = Grow(CellRect(cell, n), -options.cell_margin_px, n);
    if (interior.area() == 0) continue;
    const double fraction =
        static_cast<double>(cv::countNonZero(foreground(interior))) / interior.area();
    if (fraction > options.extra_object_fraction) {
      Fail(v, &Verdict::position,
           absl::StrFormat("position: unexpected object in %s (%.0f%% foreground)",
                           PositionName(cell), 100 * fraction));
    }
  }
}

// The background against its claim, outside the `judged` mask; returns the background the
// objects are measured against (the claimed one, or the estimated one when the claim failed)
// and each pixel's distance from it.
std::pair<cv::Mat, cv::Mat> JudgeBackground(Verdict& v, const CaptionClaims& claims,
                                            const cv::Mat& rgb, const cv::Mat& judged,
                                            const SynthEvalOptions& options) {
  const int n = rgb.rows;
  cv::Mat background_model = *RenderBackground(claims.background, n);  // validated by the caller
  cv::Mat distance = BackgroundDistance(rgb, background_model);
  const BackgroundVerdict bg =
      CheckBackground(claims.background, rgb, distance, judged, options.background);
  v.background_consistency = bg.consistency;
  if (!bg.ok) {
    v.background = false;
    for (const auto& r : bg.reasons) v.reasons.push_back(r);
    auto estimated = RenderBackground(EstimateBackground(rgb, judged, options.background), n);
    if (estimated.ok()) {
      background_model = *estimated;
      distance = BackgroundDistance(rgb, background_model);
    }
  }
  return {background_model, distance};
}

}  // namespace

std::string Verdict::ToString() const {
  auto mark = [](bool ok) { return ok ? "ok" : "FAIL"; };
  std::string s = absl::StrFormat("%s  colour=%s shape=%s size=%s position=%s background=%s",
                                  pass ? "PASS" : "FAIL", mark(color), mark(shape), mark(size),
                                  mark(position), mark(background));
  for (const auto& r : reasons) absl::StrAppend(&s, "\n  ", r);
  return s;
}

absl::StatusOr<Verdict> SynthEval::Evaluate(const std::string& caption, const cv::Mat& rgb) const {
  auto claims = ParseCaption(caption);
  if (!claims.ok()) return claims.status();
  return EvaluateClaims(*claims, rgb);
}

Verdict SynthEval::EvaluateClaims(const CaptionClaims& claims, const cv::Mat& rgb) const {
  Verdict v;
  for (const auto& claim : claims.objects) v.objects.push_back({claim});

  // Images that cannot be judged fail every attribute: nothing was verified.
  const std::string unusable = UnusableReason(claims, rgb, options_);
  if (!unusable.empty()) {
    v.color = v.shape = v.size = v.position = v.background = v.pass = false;
    v.reasons.push_back("image: " + unusable);
    return v;
  }
  const int n = rgb.rows;

  // Background: judged outside the claimed objects' cells (grown by the margin, so that a
  // blurred edge of a claimed object is not counted as background).
  cv::Mat judged(n, n, CV_8U, cv::Scalar(1));
  std::array<bool, kCells> claimed{};
  for (const auto& claim : claims.objects) {
    if (claim.cell < 0 || claim.cell >= kCells) continue;
    claimed[claim.cell] = true;
    judged(Grow(CellRect(claim.cell, n), options_.cell_margin_px, n)).setTo(0);
  }
  const auto [background_model, distance] = JudgeBackground(v, claims, rgb, judged, options_);
  const cv::Mat foreground = distance > options_.foreground_threshold;  // CV_8U 0 / 255

  // Claimed objects.
  const double small_h = HalfExtent(Size::kSmall) * n;
  const int min_area =
      std::max(1, static_cast<int>(options_.min_object_area_fraction * 2.0 * small_h * small_h));
  for (auto& report : v.objects) {
    const ObjectClaim& claim = report.claim;
    const std::string what = absl::StrCat(Describe(claim), " in the ", PositionName(claim.cell));
    if (claim.cell < 0 || claim.cell >= kCells) {
      Fail(v, &Verdict::position, absl::StrCat("position: cell ", claim.cell, " is not 0..8"));
      continue;
    }
    const ObjectProbe probe =
        ProbeObject({rgb, background_model, distance, foreground}, CellRect(claim.cell, n),
                    options_.cell_margin_px, min_area);
    report.area = probe.area;
    if (!probe.found) {
      const std::string missing = absl::StrCat("no ", what, " (nothing found there)");
      Fail(v, &Verdict::color, "colour: " + missing);
      Fail(v, &Verdict::shape, "shape: " + missing);
      if (claim.size) Fail(v, &Verdict::size, "size: " + missing);
      Fail(v, &Verdict::position, "position: " + missing);
      continue;
    }
    report.found = true;
    report.centroid = probe.centroid;
    report.measured_color = probe.color;
    if (report.measured_color != claim.color) {
      Fail(v, &Verdict::color,
           absl::StrCat("colour: the ", what, " looks ", report.measured_color));
    }

    JudgeShapeAndSize(v, report, probe, what, n, options_);

    // Position: where the object's mass is, not just where something was found.
    const double cu = (report.centroid.x + 0.5) / n, cv_ = (report.centroid.y + 0.5) / n;
    const int col = claim.cell % kGrid, row = claim.cell / kGrid;
    if (cu < col / 3.0 || cu >= (col + 1) / 3.0 || cv_ < row / 3.0 || cv_ >= (row + 1) / 3.0) {
      Fail(v, &Verdict::position,
           absl::StrFormat("position: the %s is centred outside its cell (at %.2f, %.2f)", what, cu,
                           cv_));
    }
  }

  FlagUnclaimedObjects(v, claimed, foreground, n, options_);

  v.pass = v.color && v.shape && v.size && v.position && v.background;
  return v;
}

}  // namespace mulo::synth
