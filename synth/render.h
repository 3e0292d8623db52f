// Pixel-exact C++ port of the synth renderer (tools/synth/domain.py: _background_pixel, inside,
// object_center, render).
//
// Every computation follows the Python operation for operation in double precision, so both
// produce identical pixels at any size (tests/synth/render_test.cc checks it against renders
// written by Python). There is no anti-aliasing: a pixel takes the colour of whatever contains
// its centre (u, v) = ((x + 0.5) / size, (y + 0.5) / size), and later objects paint over
// earlier ones.
//
// Images are cv::Mat CV_8UC3 in **RGB** channel order (not OpenCV's usual BGR), matching the
// Python arrays and the model's output; convert with cv::cvtColor before cv::imwrite.
#ifndef MULO_SYNTH_RENDER_H_
#define MULO_SYNTH_RENDER_H_

#include <opencv2/core.hpp>

#include <utility>

#include "absl/status/statusor.h"
#include "synth/palette.h"
#include "synth/scene.h"

namespace mulo::synth {

// domain.inside: whether offset (du, dv) from a shape's centre (image widths, v pointing down)
// lies inside a shape of half-extent h. The triangle has its apex up at (0, -h) and its base
// from (-h, h) to (h, h).
bool Inside(Shape shape, double du, double dv, double h);

// domain.object_center: (u, v) of the object's centre in image widths.
std::pair<double, double> ObjectCenter(const SceneObject& obj);
std::pair<double, double> CellCenter(int cell);

// domain._background_pixel; (0, 0, 0) for a background that fails ValidateBackground.
Rgb BackgroundPixel(const Background& background, double u, double v);

// domain.render: a size x size CV_8UC3 RGB image. InvalidArgument for an unknown colour or a
// size below 1.
absl::StatusOr<cv::Mat> Render(const Scene& scene, int size);

// The background alone (a scene with no objects).
absl::StatusOr<cv::Mat> RenderBackground(const Background& background, int size);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_RENDER_H_
