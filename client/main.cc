// mulo_client: talks to mulo_server.
//
//   mulo_client generate --prompt="a small red circle in the top left on a blue background"
//                        --method=ar --seed=1 --out=image.png
//   mulo_client models
//
// `generate` draws a live progress bar from the streamed rows, writes the image and prints
// the request's Stats. On error it prints the server's status code and message and exits 1.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "mulo/v1/image_generation.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:8001", "mulo_server address (host:port)");
ABSL_FLAG(std::string, model, "synth", "model family to use");
ABSL_FLAG(std::string, prompt, "", "text prompt");
ABSL_FLAG(std::string, method, "ar", "decoding method: ar");
ABSL_FLAG(uint64_t, seed, 0, "sampling seed");
ABSL_FLAG(double, cfg_scale, -1, "CFG scale (-1 = the model's default)");
ABSL_FLAG(double, temperature, -1, "sampling temperature (-1 = default 1.0; 0 = greedy)");
ABSL_FLAG(int, top_k, 0, "top-k (0 = off)");
ABSL_FLAG(double, top_p, -1, "top-p (-1 = default 1.0)");
ABSL_FLAG(std::string, format, "png", "png, jpeg or raw");
ABSL_FLAG(std::string, out, "image.png", "where to write the image");
ABSL_FLAG(double, timeout, 300, "request deadline in seconds");
ABSL_FLAG(std::string, tls_ca, "", "PEM root certificate: connect with TLS");

namespace {

using mulo::v1::ImageGeneration;

std::shared_ptr<grpc::Channel> Connect() {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!absl::GetFlag(FLAGS_tls_ca).empty()) {
    std::ifstream in(absl::GetFlag(FLAGS_tls_ca));
    std::string pem((std::istreambuf_iterator<char>(in)), {});
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pem;
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  return grpc::CreateCustomChannel(absl::GetFlag(FLAGS_server), credentials, args);
}

int Fail(const grpc::Status& status) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                 "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                 "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int code = status.error_code();
  std::fprintf(stderr, "error: %s: %s\n", code >= 0 && code <= 16 ? kNames[code] : "?",
               status.error_message().c_str());
  return 1;
}

void DrawProgress(int rows, int total, double seconds) {
  const int width = 30;
  const int filled = total > 0 ? rows * width / total : 0;
  std::string bar(filled, '#');
  bar.append(width - filled, '.');
  std::fprintf(stderr, "\r[%s] %d/%d rows  %.1fs", bar.c_str(), rows, total, seconds);
  std::fflush(stderr);
}

int Generate() {
  if (absl::GetFlag(FLAGS_prompt).empty()) {
    std::fprintf(stderr, "error: --prompt is required\n");
    return 2;
  }
  mulo::v1::GenerateRequest request;
  request.set_model(absl::GetFlag(FLAGS_model));
  request.set_prompt(absl::GetFlag(FLAGS_prompt));
  auto* sampling = request.mutable_sampling();
  sampling->set_seed(absl::GetFlag(FLAGS_seed));
  if (absl::GetFlag(FLAGS_cfg_scale) >= 0) sampling->set_cfg_scale(absl::GetFlag(FLAGS_cfg_scale));
  if (absl::GetFlag(FLAGS_temperature) >= 0) {
    sampling->set_temperature(absl::GetFlag(FLAGS_temperature));
  }
  sampling->set_top_k(absl::GetFlag(FLAGS_top_k));
  if (absl::GetFlag(FLAGS_top_p) >= 0) sampling->set_top_p(absl::GetFlag(FLAGS_top_p));
  const std::string method = absl::GetFlag(FLAGS_method);
  if (method == "ar") {
    request.mutable_ar();
  } else {
    std::fprintf(stderr, "error: --method=%s is not known to this client (ar)\n", method.c_str());
    return 2;
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  request.set_image_format(format == "jpeg" ? mulo::v1::JPEG
                           : format == "raw" ? mulo::v1::RAW_RGB
                                             : mulo::v1::PNG);

  auto stub = ImageGeneration::NewStub(Connect());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(
                           absl::GetFlag(FLAGS_timeout) * 1000)));
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto reader = stub->Generate(&context, request);
  mulo::v1::GenerateResponse response;
  mulo::v1::ImageEvent image;
  bool have_image = false;
  int rows = 0, total_rows = 0;
  double first_row = -1;
  const bool tty = isatty(STDERR_FILENO);
  while (reader->Read(&response)) {
    if (response.has_rows()) {
      const auto& r = response.rows();
      if (first_row < 0) first_row = seconds();
      rows = static_cast<int>(r.first_row()) + r.tokens_size() / std::max<int>(1, r.width());
      total_rows = static_cast<int>(r.width());  // square grids
      if (tty) DrawProgress(rows, total_rows, seconds());
    } else if (response.has_image()) {
      image = response.image();
      have_image = true;
    }
  }
  grpc::Status status = reader->Finish();
  if (tty && rows > 0) std::fprintf(stderr, "\n");
  if (!status.ok()) return Fail(status);
  if (!have_image) {
    std::fprintf(stderr, "error: the stream ended without an image\n");
    return 1;
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  out.write(image.data().data(), static_cast<std::streamsize>(image.data().size()));
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s\n", absl::GetFlag(FLAGS_out).c_str());
    return 1;
  }
  const auto& s = image.stats();
  std::printf("wrote %s (%ux%u, %u tokens, request %s)\n", absl::GetFlag(FLAGS_out).c_str(),
              image.width(), image.height(), static_cast<unsigned>(image.tokens_size()),
              response.request_id().c_str());
  std::printf("latency %.3fs (first row %.3fs, server queue %.3fs, server decode %.3fs)\n",
              seconds(), first_row, s.queue_seconds(), s.total_seconds());
  std::printf("target forwards %u, draft forwards %u, step compression %.2f", s.target_forward_passes(),
              s.draft_forward_passes(), s.step_compression());
  if (s.drafted_tokens() > 0) {
    std::printf(", acceptance %.3f (%u/%u drafted), resampled %u", s.acceptance_rate(),
                s.accepted_tokens(), s.drafted_tokens(), s.resampled_tokens());
  }
  std::printf("\nphases:");
  for (const auto& [phase, t] : s.phase_seconds()) std::printf(" %s=%.3fs", phase.c_str(), t);
  std::printf("\n");
  return 0;
}

int Models() {
  auto stub = ImageGeneration::NewStub(Connect());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  mulo::v1::ListModelsResponse response;
  grpc::Status status = stub->ListModels(&context, mulo::v1::ListModelsRequest(), &response);
  if (!status.ok()) return Fail(status);
  for (const auto& m : response.models()) {
    std::string methods;
    for (const auto& x : m.methods()) absl::StrAppend(&methods, methods.empty() ? "" : ",", x);
    std::printf("%s  %ux%u px  grid %ux%u  vocab %u  methods %s  cfg %.1f\n", m.name().c_str(),
                m.image_width(), m.image_height(), m.grid_size(), m.grid_size(), m.vocab_size(),
                methods.c_str(), m.default_sampling().cfg_scale());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "mulo_client generate --prompt=... [--method=ar --seed=N --out=image.png] | models");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "generate") return Generate();
  if (command == "models") return Models();
  std::fprintf(stderr, "usage: mulo_client generate --prompt=... | mulo_client models\n");
  return 2;
}
