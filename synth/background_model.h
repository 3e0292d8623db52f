// The background half of SynthEval: what the claimed background should look like, how far
// each pixel is from it, and whether the image's background agrees with the claim.
//
// All colour decisions are nearest-palette classifications of robust (median) statistics:
// background colours are >= 58 apart in RGB, so a median that is off by less than ~29 still
// names the right colour, which tolerates noise, blur and a model's slight colour drift.
#ifndef MULO_SYNTH_BACKGROUND_MODEL_H_
#define MULO_SYNTH_BACKGROUND_MODEL_H_

#include <opencv2/core.hpp>

#include <string>
#include <vector>

#include "synth/scene.h"

namespace mulo::synth {

struct BackgroundOptions {
  // A pixel agrees with the expected background when its distance (BackgroundDistance) is at
  // most this. Half the smallest gap between background colours (58) would be 29; 40 leaves
  // room for noise while a wrong colour (>= 58 away) still disagrees.
  double tolerance = 40.0;
  // Fraction of the judged pixels that must agree. Objects never sit in judged pixels of a
  // correct caption, so a correct background scores ~1; a wrong kind with the right colours
  // (stripes vs gradient vs solid) agrees on only about half the image.
  double min_consistency = 0.85;
  // Gradient colours are judged on the top and bottom bands of this height (image fraction):
  // the band median sits 5% of the way along the gradient, < 19 from the end colour.
  double band = 0.1;
};

// RGB distance from p to the segment [a, b]: how far p is from every blend of a and b.
double SegmentDistance(const cv::Vec3d& p, const cv::Vec3d& a, const cv::Vec3d& b);

// Per-pixel (CV_32F) distance from `rgb` to the colours a slightly blurred `expected` image
// could have there: the nearest point on any segment from expected(p) to expected(q), q in
// p's 3x3 neighbourhood. Away from stripe edges this is the plain RGB distance; on an edge a
// mix of the two stripe colours (a blurred or resampled edge) counts as background rather
// than as a 1-pixel line of foreground. Both images are CV_8UC3 of the same size.
cv::Mat BackgroundDistance(const cv::Mat& rgb, const cv::Mat& expected);

struct BackgroundVerdict {
  bool ok = true;
  std::vector<std::string> reasons;
  double consistency = 0.0;  // fraction of judged pixels that agree with the claim
};

// Judges `claim` on the pixels where `judged` (CV_8U, nonzero) is set: its colours by
// nearest-palette classification of medians (solid: all judged pixels; gradient: top and
// bottom bands; stripes: the middle half of even and of odd stripes, away from edges) and its
// kind by the consistency of `distance` (BackgroundDistance to the rendered claim).
BackgroundVerdict CheckBackground(const Background& claim, const cv::Mat& rgb,
                                  const cv::Mat& distance, const cv::Mat& judged,
                                  const BackgroundOptions& options);

// The background that best explains the judged pixels: for each kind, the colours read off
// the image as in CheckBackground, then the kind whose rendering agrees with the most judged
// pixels. SynthEval separates objects from this background when the claimed one is wrong, so
// that a wrong background claim does not also fail every object.
Background EstimateBackground(const cv::Mat& rgb, const cv::Mat& judged,
                              const BackgroundOptions& options);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_BACKGROUND_MODEL_H_
