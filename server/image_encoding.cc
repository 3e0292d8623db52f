#include "server/image_encoding.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <vector>

namespace mulo::server {

absl::StatusOr<std::string> EncodeImage(const engine::RgbImage& image, v1::ImageFormat format) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width * image.height * 3)) {
    return absl::InternalError("image has inconsistent dimensions");
  }
  if (format == v1::RAW_RGB) {
    return std::string(image.pixels.begin(), image.pixels.end());
  }
  cv::Mat rgb(static_cast<int>(image.height), static_cast<int>(image.width), CV_8UC3,
              const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);  // OpenCV's codecs expect BGR
  std::vector<uchar> bytes;
  const bool ok = format == v1::JPEG
                      ? cv::imencode(".jpg", bgr, bytes, {cv::IMWRITE_JPEG_QUALITY, 95})
                      : cv::imencode(".png", bgr, bytes);
  if (!ok) return absl::InternalError("image encoding failed");
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace mulo::server
