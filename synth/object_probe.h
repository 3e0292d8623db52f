// Finding and measuring one claimed object: the foreground component in its cell, its colour,
// and its outline with blurred edges resolved.
//
// Generated (or blurred, or resampled) images blend an object's edge with the background
// behind it. A pixel that is a fraction a object and 1 - a background lies on the RGB segment
// between the two colours, so:
//  - the colour is the object colour whose mixes with the local background explain the most
//    object-like pixels best (for unblended pixels this is simply the nearest colour);
//  - the outline keeps the pixels that are more object than background (a > 1/2: closer to
//    the object colour than to the background), which undoes a symmetric blur of an edge
//    instead of letting a fixed threshold grow or shrink the shape.
#ifndef MULO_SYNTH_OBJECT_PROBE_H_
#define MULO_SYNTH_OBJECT_PROBE_H_

#include <opencv2/core.hpp>

#include <string>

namespace mulo::synth {

struct ObjectProbe {
  bool found = false;
  cv::Rect region;                   // the searched rectangle (the cell grown by the margin)
  int area = 0;                      // pixels of the detected component
  cv::Mat mask;                      // the object's outline (CV_8U over `region`, nonzero = object)
  cv::Point2d centroid{-1.0, -1.0};  // of `mask`, in image pixel indices
  std::string color;                 // object colour name
};

struct ProbeInputs {
  const cv::Mat& rgb;         // CV_8UC3 image
  const cv::Mat& background;  // CV_8UC3 background model of the same size
  const cv::Mat& distance;    // CV_32F BackgroundDistance(rgb, background)
  const cv::Mat& foreground;  // CV_8U distance > threshold
};

// Looks for an object centred in `cell`, searching `cell` grown by `margin` pixels. Not found
// when the chosen component has fewer than `min_area` pixels.
ObjectProbe ProbeObject(const ProbeInputs& in, const cv::Rect& cell, int margin, int min_area);

}  // namespace mulo::synth

#endif  // MULO_SYNTH_OBJECT_PROBE_H_
