// Shape and size recognition by template matching against the renderer's own geometry.
//
// A detected object (a binary mask) is compared with every shape x size template drawn by
// Inside() exactly as the renderer draws it (pixel centres, no anti-aliasing), at sub-pixel
// centre offsets around where the template's centroid meets the mask's centroid. The score is
// intersection over union; a perfect render of the claimed object scores 1 at the right offset.
#ifndef MULO_SYNTH_SHAPE_FIT_H_
#define MULO_SYNTH_SHAPE_FIT_H_

#include <opencv2/core.hpp>

#include <algorithm>
#include <array>

#include "synth/palette.h"

namespace mulo::synth {

struct ShapeFitOptions {
  // Centre offsets searched around the centroid match, in pixels: the jitter makes the true
  // centre land anywhere within a pixel, and a blurred or noisy mask moves the centroid a bit.
  double offset_range_px = 1.5;
  double offset_step_px = 0.25;
};

struct ShapeFit {
  // Best IoU of each template over the searched offsets, indexed [shape][size].
  std::array<std::array<double, 2>, 4> iou{};
  Shape best_shape = Shape::kCircle;
  Size best_size = Size::kSmall;
  double best_iou = 0.0;

  double Iou(Shape shape, Size size) const {
    return iou[static_cast<int>(shape)][static_cast<int>(size)];
  }
  // The shape's IoU at its better-fitting size.
  double BestForShape(Shape shape) const {
    return std::max(Iou(shape, Size::kSmall), Iou(shape, Size::kLarge));
  }
};

// `mask` (CV_8U, nonzero = object) covers the image region whose top-left pixel is `origin`
// in an image of `image_size` x `image_size` pixels; `centroid` is the mask's centroid in
// image pixel indices (as cv::connectedComponentsWithStats reports it).
ShapeFit FitShapes(const cv::Mat& mask, cv::Point origin, int image_size, cv::Point2d centroid,
                   const ShapeFitOptions& options = ShapeFitOptions());

}  // namespace mulo::synth

#endif  // MULO_SYNTH_SHAPE_FIT_H_
