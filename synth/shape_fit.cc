#include "synth/shape_fit.h"

#include <algorithm>
#include <cmath>

#include "synth/render.h"

namespace mulo::synth {
namespace {

// Centroid of the shape relative to its centre (image widths). Only the triangle's differs:
// vertices (0, -h), (-h, h), (h, h) put it h / 3 below the centre.
double CentroidOffsetV(Shape shape, double h) { return shape == Shape::kTriangle ? h / 3.0 : 0.0; }

// IoU of the mask with the template centred at (centre_u, centre_v) in image widths.
double TemplateIou(const cv::Mat& mask, cv::Point origin, int n, int mask_area, Shape shape,
                   double h, double centre_u, double centre_v) {
  // Pixels whose centre can lie within h of the centre, clipped to the image.
  const int x0 = std::max(0, static_cast<int>(std::ceil(n * (centre_u - h) - 0.5)));
  const int x1 = std::min(n - 1, static_cast<int>(std::floor(n * (centre_u + h) - 0.5)));
  const int y0 = std::max(0, static_cast<int>(std::ceil(n * (centre_v - h) - 0.5)));
  const int y1 = std::min(n - 1, static_cast<int>(std::floor(n * (centre_v + h) - 0.5)));
  int area = 0, inter = 0;
  for (int y = y0; y <= y1; ++y) {
    const double dv = (y + 0.5) / n - centre_v;
    const int my = y - origin.y;
    const bool row_in_mask = my >= 0 && my < mask.rows;
    const uchar* mask_row = row_in_mask ? mask.ptr<uchar>(my) : nullptr;
    for (int x = x0; x <= x1; ++x) {
      if (!Inside(shape, (x + 0.5) / n - centre_u, dv, h)) continue;
      ++area;
      const int mx = x - origin.x;
      if (mask_row != nullptr && mx >= 0 && mx < mask.cols && mask_row[mx] != 0) ++inter;
    }
  }
  const int uni = area + mask_area - inter;
  return uni == 0 ? 0.0 : static_cast<double>(inter) / uni;
}

}  // namespace

ShapeFit FitShapes(const cv::Mat& mask, cv::Point origin, int image_size, cv::Point2d centroid,
                   const ShapeFitOptions& options) {
  ShapeFit fit;
  const int n = image_size;
  const int mask_area = cv::countNonZero(mask);
  // Centroid in image widths (pixel index x has its centre at (x + 0.5) / n).
  const double mu = (centroid.x + 0.5) / n, mv = (centroid.y + 0.5) / n;
  const int steps = static_cast<int>(std::round(options.offset_range_px / options.offset_step_px));
  for (Shape shape : kShapes) {
    for (Size size : kSizes) {
      const double h = HalfExtent(size);
      const double base_v = mv - CentroidOffsetV(shape, h);
      double best = 0.0;
      for (int iy = -steps; iy <= steps; ++iy) {
        for (int ix = -steps; ix <= steps; ++ix) {
          const double centre_u = mu + ix * options.offset_step_px / n;
          const double centre_v = base_v + iy * options.offset_step_px / n;
          best =
              std::max(best, TemplateIou(mask, origin, n, mask_area, shape, h, centre_u, centre_v));
        }
      }
      fit.iou[static_cast<int>(shape)][static_cast<int>(size)] = best;
      if (best > fit.best_iou) {
        fit.best_iou = best;
        fit.best_shape = shape;
        fit.best_size = size;
      }
    }
  }
  return fit;
}

}  // namespace mulo::synth
