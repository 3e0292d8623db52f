// What a generation reports while it runs, in no transport's terms: committed token rows (with
// a decoded preview when one is due), the final image, and the end with its status. The gRPC
// and HTTP adapters turn these into their own wire messages.
#ifndef MULO_SERVER_GENERATION_EVENT_H_
#define MULO_SERVER_GENERATION_EVENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/decode/stats.h"
#include "mulo/v1/image_generation.pb.h"

namespace mulo::server {

struct GenerationEvent {
  enum class Kind { kRows, kImage, kDone };
  Kind kind = Kind::kDone;
  std::string request_id;  // the server's id of the request (the client's, or one it assigned)

  // kRows: rows [first_row, first_row + num_rows) of `width` tokens each were committed.
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t width = 0;
  // kRows: the new rows' tokens; kImage: every token of the image, row-major.
  std::vector<int32_t> tokens;
  // kRows: every committed row decoded and encoded in the request's format, when a preview
  // was due at these rows (empty otherwise); previews are numbered from 0.
  std::string preview;
  int preview_index = -1;

  // kImage: the encoded image and what it took.
  std::string image;
  v1::ImageFormat format = v1::PNG;
  int64_t image_width = 0;
  int64_t image_height = 0;
  engine::Stats stats;
  double queue_seconds = 0.0;
  double first_row_seconds = -1.0;  // from the job's queueing to its first committed row
  std::string method;         // the method that ran (auto's choice)
  std::string method_choice;  // auto: why that method; empty otherwise

  // kDone: the generation's outcome; the last event, always sent exactly once.
  absl::Status status;
};

// Receives a generation's events, in order, on the thread that produced them (a worker, or
// the thread that cancelled a queued job). It must return quickly: hand the event to the
// adapter's own thread or connection and wake it.
using GenerationListener = std::function<void(GenerationEvent)>;

}  // namespace mulo::server

#endif  // MULO_SERVER_GENERATION_EVENT_H_
