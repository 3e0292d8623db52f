// RGB images to the wire formats of ImageEvent (PNG, JPEG, WebP, raw RGB), via libpng,
// libjpeg and libwebp, resized first when the request asks for another size (OpenCV's imgproc).
#ifndef MULO_SERVER_IMAGE_ENCODING_H_
#define MULO_SERVER_IMAGE_ENCODING_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/model/vq_decoder.h"
#include "mulo/v1/image_generation.pb.h"

namespace mulo::server {

struct EncodeOptions {
  v1::ImageFormat format = v1::PNG;
  int width = 0, height = 0;  // the size to resize to; 0: the image's own
  int quality = 0;            // JPEG / WebP quality in [1, 100]; 0: the default
};

// The image resized as `options` ask (area interpolation when shrinking, bicubic otherwise).
engine::RgbImage ResizeImage(const engine::RgbImage& image, int width, int height);

absl::StatusOr<std::string> EncodeImage(const engine::RgbImage& image,
                                        const EncodeOptions& options);
inline absl::StatusOr<std::string> EncodeImage(const engine::RgbImage& image,
                                               v1::ImageFormat format) {
  return EncodeImage(image, EncodeOptions{format});
}

}  // namespace mulo::server

#endif  // MULO_SERVER_IMAGE_ENCODING_H_
