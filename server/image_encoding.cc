#include "server/image_encoding.h"

// libpng and libjpeg(-turbo) directly, the codecs OpenCV's imgcodecs wraps: imgcodecs drags in
// GDAL, FFmpeg and ~130 more shared libraries (222 MB), which a server built against another
// LibTorch (a CUDA machine, a CUDA image) would otherwise have to carry for two formats.
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without including them
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/types.h>

#include <csetjmp>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "opencv2/imgproc.hpp"

namespace mulo::server {
namespace {

constexpr int kJpegQuality = 95;

absl::StatusOr<std::string> EncodePng(const engine::RgbImage& image) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  // One compression into libpng's upper bound on the stream's size (asking for the exact size
  // first would compress twice). The simplified API reports failures in png.message instead of
  // longjmp-ing through us.
  png_alloc_size_t size = PNG_IMAGE_PNG_SIZE_MAX(png);
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&png, bytes.data(), &size, /*convert_to_8_bit=*/0,
                                 image.pixels.data(), /*row_stride=*/0, /*colormap=*/nullptr)) {
    return absl::InternalError(absl::StrCat("PNG encoding failed: ", png.message));
  }
  bytes.resize(size);
  return bytes;
}

// libjpeg reports errors through error_exit, which must not return; it jumps back to
// EncodeJpeg's setjmp. Nothing with a destructor lives between the two.
struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JumpOnJpegError(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  info->err->format_message(info, error->message);
  std::longjmp(error->jump, 1);
}

// Plain C state only: a longjmp skips destructors.
bool CompressJpeg(const engine::RgbImage& image, int quality, unsigned char** out,
                  unsigned long* out_size, JpegError* error) {
  jpeg_compress_struct info;
  info.err = jpeg_std_error(&error->manager);
  error->manager.error_exit = JumpOnJpegError;
  if (setjmp(error->jump)) {
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, out, out_size);
  info.image_width = static_cast<JDIMENSION>(image.width);
  info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = 3;
  info.in_color_space = JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, /*force_baseline=*/TRUE);
  jpeg_start_compress(&info, TRUE);
  const int64_t stride = image.width * 3;
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPLE*>(image.pixels.data() + info.next_scanline * stride);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

absl::StatusOr<std::string> EncodeJpeg(const engine::RgbImage& image, int quality) {
  unsigned char* buffer = nullptr;  // allocated by libjpeg's memory destination
  unsigned long size = 0;           // NOLINT(runtime/int): libjpeg's type
  JpegError error{};
  const bool ok = CompressJpeg(image, quality, &buffer, &size, &error);
  std::string bytes = ok ? std::string(reinterpret_cast<const char*>(buffer), size) : "";
  std::free(buffer);
  if (!ok) return absl::InternalError(absl::StrCat("JPEG encoding failed: ", error.message));
  return bytes;
}


// WebP through libwebp's simple API: lossless at quality 100 (and by default), lossy otherwise.
absl::StatusOr<std::string> EncodeWebp(const engine::RgbImage& image, int quality) {
  uint8_t* output = nullptr;
  const int width = static_cast<int>(image.width), height = static_cast<int>(image.height);
  const size_t size =
      quality <= 0 || quality >= 100
          ? WebPEncodeLosslessRGB(image.pixels.data(), width, height, width * 3, &output)
          : WebPEncodeRGB(image.pixels.data(), width, height, width * 3,
                          static_cast<float>(quality), &output);
  if (size == 0 || output == nullptr) return absl::InternalError("WebP encoding failed");
  std::string bytes(reinterpret_cast<const char*>(output), size);
  WebPFree(output);
  return bytes;
}

}  // namespace

engine::RgbImage ResizeImage(const engine::RgbImage& image, int width, int height) {
  if (width <= 0 || height <= 0 || (width == image.width && height == image.height)) return image;
  const cv::Mat in(static_cast<int>(image.height), static_cast<int>(image.width), CV_8UC3,
                   const_cast<uint8_t*>(image.pixels.data()));
  engine::RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * height * 3);
  cv::Mat resized(height, width, CV_8UC3, out.pixels.data());
  const bool shrinking = width < image.width && height < image.height;
  cv::resize(in, resized, resized.size(), 0, 0, shrinking ? cv::INTER_AREA : cv::INTER_CUBIC);
  return out;
}

absl::StatusOr<std::string> EncodeImage(const engine::RgbImage& original,
                                        const EncodeOptions& options) {
  if (original.width <= 0 || original.height <= 0 ||
      original.pixels.size() != static_cast<size_t>(original.width * original.height * 3)) {
    return absl::InternalError("image has inconsistent dimensions");
  }
  const engine::RgbImage image = ResizeImage(original, options.width, options.height);
  switch (options.format) {
    case v1::RAW_RGB:
      return std::string(image.pixels.begin(), image.pixels.end());
    case v1::JPEG:
      return EncodeJpeg(image, options.quality > 0 ? options.quality : kJpegQuality);
    case v1::WEBP:
      return EncodeWebp(image, options.quality);
    default:
      return EncodePng(image);
  }
}

}  // namespace mulo::server
