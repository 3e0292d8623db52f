#include "synth/object_probe.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "synth/background_model.h"
#include "synth/palette.h"

namespace mulo::synth {
namespace {

cv::Vec3d At(const cv::Mat& image, int x, int y) { return image.at<cv::Vec3b>(y, x); }
cv::Vec3d ToVec(const Rgb& c) { return {double(c.r), double(c.g), double(c.b)}; }

// Picks the component for the cell: the largest one centred inside the cell itself. The
// margin lets a claimed object reach past the cell border, but it also catches slivers of a
// neighbouring cell's object, which at 32 px can outweigh a small object. Only when no
// component is centred in the cell does the largest one stand in (and then fails position).
int ChooseComponent(const cv::Mat& stats, const cv::Mat& centroids, int count, const cv::Rect& cell,
                    const cv::Rect& region) {
  int best = 0;
  bool best_centred = false;
  for (int i = 1; i < count; ++i) {
    const bool centred = cell.contains(
        cv::Point(static_cast<int>(std::floor(centroids.at<double>(i, 0) + 0.5)) + region.x,
                  static_cast<int>(std::floor(centroids.at<double>(i, 1) + 0.5)) + region.y));
    const bool larger =
        best == 0 || stats.at<int>(i, cv::CC_STAT_AREA) > stats.at<int>(best, cv::CC_STAT_AREA);
    if ((centred && !best_centred) || (centred == best_centred && larger)) {
      best = i;
      best_centred = centred;
    }
  }
  return best;
}

// The object colour by a vote of the component's pixels: each pixel votes for the palette
// colour whose blend with that pixel's background passes closest to it (the direction of the
// pixel away from the background identifies the colour however faint the blend). A vote rather
// than a statistic of the most contrasting pixels, so that a sliver of a touching neighbour
// of another colour, which may contrast more with the background, cannot outvote the object.
const NamedColor& EstimateColor(const ProbeInputs& in, const cv::Mat& component,
                                const cv::Rect& region) {
  std::array<int, kObjectColors.size()> votes{};
  for (int y = 0; y < component.rows; ++y) {
    for (int x = 0; x < component.cols; ++x) {
      if (component.at<uchar>(y, x) == 0) continue;
      const int ix = x + region.x, iy = y + region.y;
      const cv::Vec3d p = At(in.rgb, ix, iy), b = At(in.background, ix, iy);
      size_t best = 0;
      double best_d = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < kObjectColors.size(); ++i) {
        const double d = SegmentDistance(p, b, ToVec(kObjectColors[i].rgb));
        if (d < best_d) {
          best_d = d;
          best = i;
        }
      }
      ++votes[best];
    }
  }
  return kObjectColors[std::max_element(votes.begin(), votes.end()) - votes.begin()];
}

}  // namespace

ObjectProbe ProbeObject(const ProbeInputs& in, const cv::Rect& cell, int margin, int min_area) {
  ObjectProbe probe;
  const cv::Rect image(0, 0, in.rgb.cols, in.rgb.rows);
  probe.region = cv::Rect(cell.x - margin, cell.y - margin, cell.width + 2 * margin,
                          cell.height + 2 * margin) &
                 image;
  const cv::Rect& region = probe.region;
  cv::Mat labels, stats, centroids;
  const int count =
      cv::connectedComponentsWithStats(in.foreground(region), labels, stats, centroids, 8, CV_32S);
  const int best = ChooseComponent(stats, centroids, count, cell, region);
  probe.area = best == 0 ? 0 : stats.at<int>(best, cv::CC_STAT_AREA);
  if (probe.area < min_area) return probe;
  probe.found = true;
  const cv::Mat component = labels == best;

  const NamedColor& color = EstimateColor(in, component, region);
  probe.color = std::string(color.name);

  // Outline: pixels near the component that are more object than background.
  cv::Mat near;
  cv::dilate(component, near, cv::Mat::ones(3, 3, CV_8U));
  const cv::Vec3d c = ToVec(color.rgb);
  probe.mask = cv::Mat::zeros(region.size(), CV_8U);
  for (int y = 0; y < region.height; ++y) {
    for (int x = 0; x < region.width; ++x) {
      if (near.at<uchar>(y, x) == 0) continue;
      const int ix = x + region.x, iy = y + region.y;
      if (cv::norm(At(in.rgb, ix, iy) - c) < in.distance.at<float>(iy, ix)) {
        probe.mask.at<uchar>(y, x) = 255;
      }
    }
  }
  // An object whose colour is nearer the background than any palette colour (heavy colour
  // drift) is not explained by the blend model; its thresholded component is then the better
  // outline. (The outline may legitimately be much smaller than the component: with a strong
  // contrast the threshold also takes in pixels that are only a fifth object.)
  if (cv::countNonZero(probe.mask) < min_area) probe.mask = component;
  const cv::Moments m = cv::moments(probe.mask, /*binaryImage=*/true);
  if (m.m00 > 0) {
    probe.centroid = {m.m10 / m.m00 + region.x, m.m01 / m.m00 + region.y};
  } else {
    probe.found = false;
  }
  return probe;
}

}  // namespace mulo::synth
