// One structured line per request on stderr: id, model, method, status, tokens, timings.
#ifndef MULO_SERVER_REQUEST_LOG_H_
#define MULO_SERVER_REQUEST_LOG_H_

#include <string>

#include "absl/status/status.h"
#include "engine/decode/stats.h"

namespace mulo::server {

struct RequestLogLine {
  std::string request_id;
  std::string model;
  std::string method;
  std::string protocol = "grpc";  // the front end it came through: grpc or http
  std::string user;               // the OpenAI API's `user`, as sent (HTTP only)
  absl::Status status;
  int64_t tokens = 0;
  double queue_seconds = 0.0;
  double first_row_seconds = -1.0;  // from arrival; negative when no row was committed
  double total_seconds = 0.0;       // from arrival to the final status
  engine::Stats stats;
};

// "request id=req-7 model=synth method=ar status=OK tokens=256 queue=0.000s first_row=0.012s
//  total=1.204s forwards=256 step_compression=1.00 protocol=grpc"
std::string FormatRequestLog(const RequestLogLine& line);
void WriteRequestLog(const RequestLogLine& line);

}  // namespace mulo::server

#endif  // MULO_SERVER_REQUEST_LOG_H_
