// The server's PNG / JPEG / raw encodings, checked by decoding them with another library
// (OpenCV's imgcodecs), since the server itself only encodes.
#include "server/image_encoding.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mulo::server {
namespace {

engine::RgbImage NoiseImage(int64_t width, int64_t height, uint32_t seed) {
  engine::RgbImage image{width, height, std::vector<uint8_t>(width * height * 3)};
  std::mt19937 rng(seed);
  for (uint8_t& value : image.pixels) value = static_cast<uint8_t>(rng() & 0xff);
  return image;
}

// Smooth colour ramps, the kind of picture a lossy codec at quality 95 keeps within a few levels.
engine::RgbImage RampImage(int64_t width, int64_t height) {
  engine::RgbImage image{width, height, std::vector<uint8_t>(width * height * 3)};
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      uint8_t* pixel = &image.pixels[(y * width + x) * 3];
      pixel[0] = static_cast<uint8_t>(255 * x / (width - 1));
      pixel[1] = static_cast<uint8_t>(255 * y / (height - 1));
      pixel[2] = static_cast<uint8_t>(128 + 100 * std::sin(0.1 * static_cast<double>(x + y)));
    }
  }
  return image;
}

// Decodes with OpenCV and returns RGB pixels in the RgbImage layout.
engine::RgbImage Decode(const std::string& bytes) {
  const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8UC1,
                        const_cast<char*>(bytes.data()));
  const cv::Mat bgr = cv::imdecode(encoded, cv::IMREAD_COLOR);
  engine::RgbImage image;
  if (bgr.empty()) return image;
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  image.width = rgb.cols;
  image.height = rgb.rows;
  image.pixels.assign(rgb.data, rgb.data + rgb.total() * 3);
  return image;
}

TEST(ImageEncodingTest, PngDecodesToTheExactPixels) {
  for (const auto& [width, height] : std::vector<std::pair<int64_t, int64_t>>{
           {64, 64}, {37, 23}, {1, 1}, {256, 3}}) {
    const engine::RgbImage image = NoiseImage(width, height, static_cast<uint32_t>(width));
    for (const v1::ImageFormat format : {v1::PNG, v1::IMAGE_FORMAT_UNSPECIFIED}) {
      const absl::StatusOr<std::string> png = EncodeImage(image, format);
      ASSERT_TRUE(png.ok()) << png.status();
      ASSERT_GE(png->size(), 8u);
      EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << "PNG signature";
      const engine::RgbImage decoded = Decode(*png);
      EXPECT_EQ(decoded.width, width);
      EXPECT_EQ(decoded.height, height);
      EXPECT_EQ(decoded.pixels, image.pixels) << width << "x" << height;
    }
  }
}

TEST(ImageEncodingTest, JpegDecodesCloseToThePixels) {
  const engine::RgbImage image = RampImage(64, 48);
  const absl::StatusOr<std::string> jpeg = EncodeImage(image, v1::JPEG);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  ASSERT_GE(jpeg->size(), 4u);
  EXPECT_EQ(jpeg->substr(0, 2), std::string("\xff\xd8", 2)) << "JPEG start-of-image marker";
  EXPECT_EQ(jpeg->substr(jpeg->size() - 2), std::string("\xff\xd9", 2)) << "end-of-image";
  const engine::RgbImage decoded = Decode(*jpeg);
  ASSERT_EQ(decoded.width, 64);
  ASSERT_EQ(decoded.height, 48);
  double total_error = 0;
  int max_error = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const int error = std::abs(int{decoded.pixels[i]} - int{image.pixels[i]});
    total_error += error;
    max_error = std::max(max_error, error);
  }
  const double mean_error = total_error / static_cast<double>(image.pixels.size());
  // Quality 95 with 4:2:0 chroma keeps a smooth image within about one level on average; a
  // low quality (the control, 10) does not.
  EXPECT_LT(mean_error, 2.0);
  EXPECT_LT(max_error, 40);
  std::vector<uchar> low_quality;
  cv::Mat bgr;
  cv::cvtColor(cv::Mat(48, 64, CV_8UC3, const_cast<uint8_t*>(image.pixels.data())), bgr,
               cv::COLOR_RGB2BGR);
  ASSERT_TRUE(cv::imencode(".jpg", bgr, low_quality, {cv::IMWRITE_JPEG_QUALITY, 10}));
  const engine::RgbImage coarse =
      Decode(std::string(low_quality.begin(), low_quality.end()));
  double coarse_error = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    coarse_error += std::abs(int{coarse.pixels[i]} - int{image.pixels[i]});
  }
  EXPECT_GT(coarse_error / static_cast<double>(image.pixels.size()), 2.0)
      << "the bound must reject a coarse encoding";
}

TEST(ImageEncodingTest, RawRgbIsThePixelsVerbatim) {
  const engine::RgbImage image = NoiseImage(5, 7, 3);
  const absl::StatusOr<std::string> raw = EncodeImage(image, v1::RAW_RGB);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(*raw, std::string(image.pixels.begin(), image.pixels.end()));
}

TEST(ImageEncodingTest, InconsistentDimensionsAreAnInternalError) {
  engine::RgbImage image = NoiseImage(4, 4, 1);
  image.pixels.pop_back();
  for (const v1::ImageFormat format : {v1::PNG, v1::JPEG, v1::RAW_RGB}) {
    const absl::StatusOr<std::string> encoded = EncodeImage(image, format);
    EXPECT_EQ(encoded.status().code(), absl::StatusCode::kInternal);
  }
  const engine::RgbImage empty;
  EXPECT_EQ(EncodeImage(empty, v1::PNG).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace mulo::server
