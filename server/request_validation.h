// Turns a wire GenerateRequest into the engine's ImageRequest at the edge, checks what the wire
// alone decides (sizes, UTF-8, formats) and has the model's engine plan the rest
// (engine/api/image_engine.h). Errors are INVALID_ARGUMENT naming the field
// ("sampling.temperature: must be in [0, 100]"), or NOT_FOUND for an unknown model.
#ifndef MULO_SERVER_REQUEST_VALIDATION_H_
#define MULO_SERVER_REQUEST_VALIDATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/api/image_engine.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/model_repository.h"

namespace mulo::server {

// Longest prompt accepted, in bytes.
inline constexpr size_t kMaxPromptBytes = 1024;
// Most evenly spaced previews a request may ask for (StreamOptions.partial_images; OpenAI's
// Images API allows 0-3).
inline constexpr uint32_t kMaxPartialImages = 3;

// Bounds of GenerateRequest.output_width / output_height.
inline constexpr uint32_t kMaxOutputSide = 4096;
inline constexpr uint64_t kMaxOutputPixels = 16777216;

struct ValidatedRequest {
  std::string request_id;
  std::string model_name;
  const engine::ImageEngine* engine = nullptr;  // the model's
  engine::ImagePlan plan;                       // what the engine runs
  v1::ImageFormat image_format = v1::PNG;
  // The image's size when it differs from the family's (0: its own) and the JPEG / WebP
  // quality (0: the default).
  int output_width = 0, output_height = 0;
  int image_quality = 0;
  bool stream_rows = true;
  int preview_every_rows = 0;
  int partial_images = 0;  // previews spaced evenly over the rows
  bool full_size_previews = false;
  bool return_commit_map = false;  // Stats.commit_map in the final image
};

absl::StatusOr<ValidatedRequest> ValidateRequest(const v1::GenerateRequest& request,
                                                 const ModelRepository& repository);

}  // namespace mulo::server

#endif  // MULO_SERVER_REQUEST_VALIDATION_H_
