#include "synth/background_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "synth/palette.h"
#include "synth/render.h"

namespace mulo::synth {
namespace {

// A per-channel median colour and the number of pixels it was taken over (0: none).
struct MedianColor {
  double r = 0, g = 0, b = 0;
  int count = 0;
};

using PixelFilter = std::function<bool(int x, int y)>;

// Per-channel median over judged pixels passing `filter`; if no judged pixel passes, over all
// pixels passing it (every claimed cell may cover a region, and a median over objects and
// background is still better than nothing).
MedianColor Median(const cv::Mat& rgb, const cv::Mat& judged, const PixelFilter& filter) {
  for (int pass = 0; pass < 2; ++pass) {
    std::array<std::array<int, 256>, 3> hist{};
    int count = 0;
    for (int y = 0; y < rgb.rows; ++y) {
      for (int x = 0; x < rgb.cols; ++x) {
        if (pass == 0 && judged.at<uchar>(y, x) == 0) continue;
        if (!filter(x, y)) continue;
        const auto& p = rgb.at<cv::Vec3b>(y, x);
        for (int c = 0; c < 3; ++c) ++hist[c][p[c]];
        ++count;
      }
    }
    if (count == 0) continue;
    MedianColor m;
    m.count = count;
    double* out[3] = {&m.r, &m.g, &m.b};
    for (int c = 0; c < 3; ++c) {
      // The lower median: the smallest value that at least half the pixels do not exceed.
      int seen = 0;
      for (int v = 0; v < 256; ++v) {
        seen += hist[c][v];
        if (2 * seen >= count) {
          *out[c] = v;
          break;
        }
      }
    }
    return m;
  }
  return {};
}

absl::string_view NearestName(const MedianColor& m) {
  return Nearest(kBackgroundColors, m.r, m.g, m.b).name;
}

double V(int y, int size) { return (y + 0.5) / size; }
double U(int x, int size) { return (x + 0.5) / size; }

// Pixels in the middle half of a stripe of the given parity: a stripe edge that is blurred or
// shifted by a pixel does not reach them.
PixelFilter StripeCentres(int size, int parity) {
  return [size, parity](int x, int) {
    const double s = U(x, size) * kStripes;
    const int stripe = static_cast<int>(s);
    const double frac = s - stripe;
    return stripe % 2 == parity && frac >= 0.25 && frac <= 0.75;
  };
}

// The colours each kind would have, read off the image.
struct KindReadings {
  MedianColor all, top, bottom, even, odd;
};

KindReadings Read(const cv::Mat& rgb, const cv::Mat& judged, const BackgroundOptions& options) {
  const int n = rgb.rows;
  KindReadings r;
  r.all = Median(rgb, judged, [](int, int) { return true; });
  r.top = Median(rgb, judged, [&](int, int y) { return V(y, n) < options.band; });
  r.bottom = Median(rgb, judged, [&](int, int y) { return V(y, n) > 1.0 - options.band; });
  r.even = Median(rgb, judged, StripeCentres(n, 0));
  r.odd = Median(rgb, judged, StripeCentres(n, 1));
  return r;
}

double Consistency(const cv::Mat& distance, const cv::Mat& judged, double tolerance) {
  int agree = 0, total = 0;
  for (int y = 0; y < distance.rows; ++y) {
    for (int x = 0; x < distance.cols; ++x) {
      if (judged.at<uchar>(y, x) == 0) continue;
      ++total;
      if (distance.at<float>(y, x) <= tolerance) ++agree;
    }
  }
  return total == 0 ? 1.0 : static_cast<double>(agree) / total;
}

}  // namespace

double SegmentDistance(const cv::Vec3d& p, const cv::Vec3d& a, const cv::Vec3d& b) {
  const cv::Vec3d ab = b - a;
  const double len2 = ab.dot(ab);
  double t = len2 > 0 ? (p - a).dot(ab) / len2 : 0.0;
  t = std::clamp(t, 0.0, 1.0);
  return cv::norm(p - (a + t * ab));
}

cv::Mat BackgroundDistance(const cv::Mat& rgb, const cv::Mat& expected) {
  CV_Assert(rgb.type() == CV_8UC3 && expected.type() == CV_8UC3 && rgb.size() == expected.size());
  cv::Mat out(rgb.size(), CV_32F);
  const int h = rgb.rows, w = rgb.cols;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const cv::Vec3d p = rgb.at<cv::Vec3b>(y, x);
      const cv::Vec3d a = expected.at<cv::Vec3b>(y, x);
      double best = cv::norm(p - a);
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int qy = y + dy, qx = x + dx;
          if ((dx == 0 && dy == 0) || qy < 0 || qy >= h || qx < 0 || qx >= w) continue;
          const cv::Vec3d b = expected.at<cv::Vec3b>(qy, qx);
          if (b == a) continue;
          best = std::min(best, SegmentDistance(p, a, b));
        }
      }
      out.at<float>(y, x) = static_cast<float>(best);
    }
  }
  return out;
}

BackgroundVerdict CheckBackground(const Background& claim, const cv::Mat& rgb,
                                  const cv::Mat& distance, const cv::Mat& judged,
                                  const BackgroundOptions& options) {
  BackgroundVerdict verdict;
  const KindReadings r = Read(rgb, judged, options);
  auto expect = [&](const MedianColor& m, const std::string& want, absl::string_view part) {
    if (m.count == 0) return;
    const absl::string_view got = NearestName(m);
    if (got != want) {
      verdict.ok = false;
      verdict.reasons.push_back(absl::StrCat("background: expected ", DescribeBackground(claim),
                                             " but ", part, " looks ", got));
    }
  };
  switch (claim.kind) {
    case BackgroundKind::kSolid:
      expect(r.all, claim.colors[0], "it");
      break;
    case BackgroundKind::kGradient:
      expect(r.top, claim.colors[0], "the top");
      expect(r.bottom, claim.colors[1], "the bottom");
      break;
    case BackgroundKind::kStripes:
      expect(r.even, claim.colors[0], "the even stripes");
      expect(r.odd, claim.colors[1], "the odd stripes");
      break;
  }
  verdict.consistency = Consistency(distance, judged, options.tolerance);
  if (verdict.consistency < options.min_consistency) {
    verdict.ok = false;
    verdict.reasons.push_back(
        absl::StrFormat("background: only %.0f%% of the background pixels match a %s",
                        100 * verdict.consistency, DescribeBackground(claim)));
  }
  return verdict;
}

Background EstimateBackground(const cv::Mat& rgb, const cv::Mat& judged,
                              const BackgroundOptions& options) {
  const KindReadings r = Read(rgb, judged, options);
  auto name = [](const MedianColor& m) { return std::string(NearestName(m)); };
  const std::array<Background, 3> candidates = {{
      {BackgroundKind::kSolid, {name(r.all)}},
      {BackgroundKind::kGradient, {name(r.top), name(r.bottom)}},
      {BackgroundKind::kStripes, {name(r.even), name(r.odd)}},
  }};
  Background best = candidates[0];
  double best_score = -1.0;
  for (const auto& candidate : candidates) {
    auto expected = RenderBackground(candidate, rgb.rows);
    if (!expected.ok()) continue;
    const double score = Consistency(BackgroundDistance(rgb, *expected), judged, options.tolerance);
    if (score > best_score) {  // ties keep the simpler kind (solid before gradient, stripes)
      best_score = score;
      best = candidate;
    }
  }
  return best;
}

}  // namespace mulo::synth
