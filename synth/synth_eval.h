// SynthEval: checks a caption's claims against an image of the synth domain, attribute by
// attribute (colour, shape, size, position, background), with a reason for each failure.
//
// How an image is judged (every threshold is a SynthEvalOptions field):
//  1. The caption is parsed into claims (caption_parser.h).
//  2. Background (background_model.h). The claimed background is rendered at the image's size
//     and compared with the pixels outside the claimed objects' cells: its colours by
//     nearest-palette classification of medians (solid: everything; gradient: top and bottom
//     bands; stripes: the middle of even and of odd stripes), its kind by the fraction of
//     pixels that match the rendering. When it fails, objects are separated from the
//     background estimated from the image instead, so that a wrong background claim does not
//     also fail every object.
//  3. Foreground: pixels farther than `foreground_threshold` from that background, measured
//     so that a blurred stripe edge is not foreground. Object colours are >= 87 from every
//     background colour of another name and a scene never uses one name for both, so 45
//     splits the gap with room for noise on either side.
//  4. Each claimed object (object_probe.h): the largest 8-connected foreground component
//     centred in its cell, searched in the cell grown by `cell_margin_px` (a large jittered
//     object reaches the cell border). Too small: the object is missing, which fails colour,
//     shape, size (when claimed) and position. Otherwise
//     - colour: a vote of its pixels for the object colour whose blend with the local
//       background explains them best;
//     - outline: the pixels that are more object than background (undoes blurred edges);
//     - shape and size: template matching of the outline against the renderer's own geometry
//       (shape_fit.h). The claimed shape passes if its IoU, at its better size, is within
//       `iou_slack` of the best shape's (ties go to the claim: at 32 px a small circle and a
//       small square can be the same pixels) and the best IoU reaches `min_shape_iou`. The
//       claimed size, judged only when the caption names it, passes if its IoU is within
//       `iou_slack` of the other size's, for the claimed shape when that passed and the best
//       shape otherwise (so a wrong shape does not also fail the size);
//     - position: the outline's centroid lies in the claimed cell.
//  5. Extra objects: an unclaimed cell whose interior (shrunk by `cell_margin_px`) is more
//     than `extra_object_fraction` foreground fails position ("unexpected object in ...").
#ifndef MULO_SYNTH_SYNTH_EVAL_H_
#define MULO_SYNTH_SYNTH_EVAL_H_

#include <opencv2/core.hpp>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "synth/background_model.h"
#include "synth/caption_parser.h"
#include "synth/shape_fit.h"

namespace mulo::synth {

struct SynthEvalOptions {
  BackgroundOptions background;
  ShapeFitOptions shape_fit;
  double foreground_threshold = 45.0;
  int cell_margin_px = 2;
  // An object is missing when its component covers less than this fraction of the smallest
  // template's area (a small triangle or diamond: 2 * (0.09 * size)^2 pixels).
  double min_object_area_fraction = 0.4;
  // Slack for shape and size decisions: IoU differences below it are not evidence.
  double iou_slack = 0.02;
  // Below this best IoU no template describes the component, so its shape is not the claimed
  // one whatever the ranking says (a blob, two merged objects, a fragment).
  double min_shape_iou = 0.5;
  double extra_object_fraction = 0.08;
  // Smaller images cannot show the 3 x 3 grid of shapes.
  int min_image_size = 16;
};

// What was measured for one claimed object (for reports and debugging).
struct ObjectReport {
  ObjectClaim claim;
  bool found = false;
  int area = 0;                      // component pixels
  cv::Point2d centroid{-1.0, -1.0};  // image pixel indices
  std::string measured_color;        // nearest object colour to the median
  ShapeFit fit;
};

struct Verdict {
  bool color = true;
  bool shape = true;
  bool size = true;
  bool position = true;
  bool background = true;
  bool pass = true;  // all of the above
  // "<attribute>: <what is wrong>", one per failure.
  std::vector<std::string> reasons;
  std::vector<ObjectReport> objects;
  double background_consistency = 0.0;

  // One line per attribute and reason.
  std::string ToString() const;
};

class SynthEval {
 public:
  explicit SynthEval(SynthEvalOptions options = SynthEvalOptions()) : options_(options) {}

  // `rgb`: a square CV_8UC3 image in RGB order, any size >= min_image_size. A caption outside
  // the grammar is InvalidArgument; an image that cannot be judged (empty, not square, not
  // 8-bit 3-channel, too small) gives a failing verdict with the reason.
  absl::StatusOr<Verdict> Evaluate(const std::string& caption, const cv::Mat& rgb) const;

  // The same for already-parsed claims.
  Verdict EvaluateClaims(const CaptionClaims& claims, const cv::Mat& rgb) const;

  const SynthEvalOptions& options() const { return options_; }

 private:
  SynthEvalOptions options_;
};

}  // namespace mulo::synth

#endif  // MULO_SYNTH_SYNTH_EVAL_H_
