// RGB images to the wire formats of ImageEvent (PNG, JPEG, raw RGB), via libpng and libjpeg.
#ifndef MULO_SERVER_IMAGE_ENCODING_H_
#define MULO_SERVER_IMAGE_ENCODING_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/model/vq_decoder.h"
#include "mulo/v1/image_generation.pb.h"

namespace mulo::server {

absl::StatusOr<std::string> EncodeImage(const engine::RgbImage& image, v1::ImageFormat format);

}  // namespace mulo::server

#endif  // MULO_SERVER_IMAGE_ENCODING_H_
