// Engine images as OpenCV matrices, for the benchmarks that judge them with SynthEval.
#ifndef MULO_BENCH_RGB_MAT_H_
#define MULO_BENCH_RGB_MAT_H_

#include <opencv2/core.hpp>

#include "engine/model/vq_decoder.h"

namespace mulo::bench {

// A CV_8UC3 copy (RGB order, as SynthEval expects) of `image`.
inline cv::Mat ToRgbMat(const engine::RgbImage& image) {
  return cv::Mat(static_cast<int>(image.height), static_cast<int>(image.width), CV_8UC3,
                 const_cast<uint8_t*>(image.pixels.data()))
      .clone();
}

}  // namespace mulo::bench

#endif  // MULO_BENCH_RGB_MAT_H_
