// Turns a wire GenerateRequest into plain engine inputs, checking every field. Errors are
// INVALID_ARGUMENT naming the field ("sampling.temperature: must be in [0, 100]"), or
// NOT_FOUND for an unknown model. Nothing here touches a model beyond its configuration.
#ifndef MULO_SERVER_REQUEST_VALIDATION_H_
#define MULO_SERVER_REQUEST_VALIDATION_H_

#include <string>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/decode/decoding_method.h"
#include "engine/decode/method_registry.h"
#include "engine/model/condition.h"
#include "engine/sampling/sampling_params.h"
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
  const engine::ModelSet* models = nullptr;
  std::string method;  // the registry's name: "ar", ...
  engine::MethodConfig method_config;  // the method's options as mapped from the request
  // The method with this request's parameters.
  std::shared_ptr<const engine::DecodingMethod> decoder;
  // The method of the prompt's decoding stage (Tar's MLLM); null = ar.
  std::shared_ptr<const engine::DecodingMethod> text_stage_decoder;
  std::string prompt;  // empty when `condition` carries precomputed features
  engine::Condition condition;
  engine::SamplingParams sampling;
  v1::ImageFormat image_format = v1::PNG;
  // The image's size when it differs from the family's (0: its own) and the JPEG / WebP
  // quality (0: the default).
  int output_width = 0, output_height = 0;
  int image_quality = 0;
  bool stream_rows = true;
  int preview_every_rows = 0;
  int partial_images = 0;  // previews spaced evenly over the rows
  bool full_size_previews = false;
};

// The methods a text stage (Tar's MLLM) may be decoded with: those the stage family runs that
// are lossless at its defaults (its output keeps the stage's distribution): ar, sjd, mc_sjd,
// sjd_pac for a stage without drafters.
std::vector<std::string> TextStageMethods(const engine::ModelSet& stage);

absl::StatusOr<ValidatedRequest> ValidateRequest(const v1::GenerateRequest& request,
                                                 const ModelRepository& repository);

}  // namespace mulo::server

#endif  // MULO_SERVER_REQUEST_VALIDATION_H_
