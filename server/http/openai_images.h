// The OpenAI Images API's JSON at the HTTP edge: POST /v1/images/generations bodies to the
// wire's GenerateRequest (so HTTP and gRPC share one validation), and the responses, stream
// events, model list and error objects back to JSON. Field names are OpenAI's; our extensions
// take the proto's names (docs/http.md).
#ifndef MULO_SERVER_HTTP_OPENAI_IMAGES_H_
#define MULO_SERVER_HTTP_OPENAI_IMAGES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/generation_event.h"
#include "server/generation_service.h"

namespace mulo::server::http {

inline constexpr int kMaxImagesPerRequest = 10;  // OpenAI's bound on n
// Deepest JSON nesting read; deeper bodies are refused before parsing.
inline constexpr int kMaxJsonDepth = 16;

// One POST /v1/images/generations, read. Every field of OpenAI's Images API is accepted (JSON
// null meaning unset) and mapped where it applies (docs/http.md, "Fields").
struct ImagesRequest {
  v1::GenerateRequest request;  // image i of n runs it with sampling.seed + i
  int n = 1;
  bool stream = false;
  std::string output_format = "png";     // png, jpeg or webp
  int width = 0, height = 0;             // `size` as asked; 0: auto (the family's own)
  // Or "url"; when the body has none, "url" for models named dall-e-* (as OpenAI answers them).
  std::string response_format = "b64_json";
  // Recorded and echoed: what the client asked for (quality also picks the method when the
  // request names none).
  std::string quality = "auto";
  std::string style;
  std::string moderation = "auto";
  std::string background = "auto";
  std::string user;
  std::optional<double> timeout_seconds;  // the `timeout` extension
};

// Reads a request body. Errors are INVALID_ARGUMENT "<param>: <problem>", naming the field as
// the client spelled it ("temperature", "mulo.tau", "n"); ParamOf(status) gives it exactly.
absl::StatusOr<ImagesRequest> ParseImagesRequest(absl::string_view body);

// Sets the request's output size when `images` asks for one other than the family's (the
// image is then resized); returns the size the images will have, "WxH".
std::string ApplySize(ImagesRequest* images, const ModelSummary& model);

// The field an error message names, as the HTTP client spells it: the text before the first
// ": " mapped from the proto's path ("sampling.temperature" -> "temperature",
// "stream.partial_images" -> "partial_images", "image_format" -> "output_format"); empty when
// the message names none.
std::string ParamOf(absl::string_view message);
// The same for a status: the field this file's reader recorded, else from the message.
std::string ParamOf(const absl::Status& status);

// An absl::Status as the HTTP status code OpenAI's clients expect. UNAVAILABLE is 503 unless
// `queue_full` (429).
int HttpStatusOf(const absl::Status& status, bool queue_full);

// {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const absl::Status& status, int http_status);

// What one finished image contributes to the response.
struct FinishedImage {
  std::string request_id;
  GenerationEvent image;  // the kImage event
};

// The `usage` object: output tokens are the image's tokens, input tokens its condition rows.
std::string UsageJson(int64_t input_tokens, int64_t output_tokens);

// What a response echoes of its request.
struct ResponseEcho {
  std::string output_format = "png", size, quality = "auto", background = "opaque";
  std::string method;  // the method that ran
  int64_t input_tokens = 0;
};

// {"created", "data": [{"b64_json"} or {"url"}], "background", "output_format", "quality",
// "size", "usage", "mulo": {...}}. `urls` (same length as `images`) replaces b64_json when given.
std::string ImagesResponseJson(int64_t created, const ResponseEcho& echo,
                               const std::vector<FinishedImage>& images,
                               const std::vector<std::string>& urls = {});

// One server-sent event, "event: <type>\ndata: <json>\n\n".
std::string PartialImageEvent(const std::string& image, int index, int64_t created_at,
                              const ResponseEcho& echo);
std::string CompletedEvent(const FinishedImage& image, int64_t created_at,
                           const ResponseEcho& echo);
std::string ErrorEvent(const absl::Status& status, int http_status);

// GET /v1/models and /v1/models/{id}.
std::string ModelJson(const ModelSummary& model, int64_t created);
std::string ModelListJson(const std::vector<ModelSummary>& models, int64_t created);

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_OPENAI_IMAGES_H_
