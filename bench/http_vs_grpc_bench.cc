// What HTTP adds to a request's latency over gRPC on one running mulo_server (issue 41's bound:
// at most 2% for an ar request). Pairs of the same request (model, prompt, method ar, seed),
// one over each front end in ABBA order so that the machine's drift cancels: gRPC Generate
// asking for the final image only (no rows events), and POST /v1/images/generations (b64_json
// in JSON). Latency is from sending until the whole response is read. Prints each front end's
// median and the median and mean of the paired ratios HTTP / gRPC.
//   http_vs_grpc_bench --grpc=127.0.0.1:8001 --http_port=8000 --model=synth --pairs=40
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/median.h"
#include "absl/strings/str_cat.h"
#include "mulo/v1/image_generation.grpc.pb.h"

ABSL_FLAG(std::string, grpc, "127.0.0.1:8001", "the server's gRPC address");
ABSL_FLAG(int, http_port, 8000, "the server's HTTP port (on 127.0.0.1)");
ABSL_FLAG(std::string, model, "synth", "model family");
ABSL_FLAG(std::string, prompt, "a large red circle in the center on a blue background", "prompt");
ABSL_FLAG(int, pairs, 40, "ABBA pairs (each pair: one request per front end)");
ABSL_FLAG(int, warmup, 4, "requests per front end first, not measured");

namespace {

using mulo::bench::Median;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One POST over a fresh connection, read to its end; the seconds it took, or -1.
double Http(int port, const std::string& body) {
  const auto start = Clock::now();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  const std::string request = absl::StrCat(
      "POST /v1/images/generations HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[65536];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  close(fd);
  if (response.rfind("HTTP/1.1 200", 0) != 0) return -1;
  return SecondsSince(start);
}

double Grpc(mulo::v1::ImageGeneration::Stub& stub, const mulo::v1::GenerateRequest& request) {
  const auto start = Clock::now();
  grpc::ClientContext context;
  auto reader = stub.Generate(&context, request);
  mulo::v1::GenerateResponse response;
  bool image = false;
  while (reader->Read(&response)) image = image || response.has_image();
  if (!reader->Finish().ok() || !image) return -1;
  return SecondsSince(start);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto stub = mulo::v1::ImageGeneration::NewStub(
      grpc::CreateChannel(absl::GetFlag(FLAGS_grpc), grpc::InsecureChannelCredentials()));
  mulo::v1::GenerateRequest request;
  request.set_model(absl::GetFlag(FLAGS_model));
  request.set_prompt(absl::GetFlag(FLAGS_prompt));
  request.mutable_sampling()->set_seed(1);
  request.mutable_stream()->set_rows(false);
  const std::string body = absl::StrCat(R"({"model": ")", absl::GetFlag(FLAGS_model),
                                        R"(", "prompt": ")", absl::GetFlag(FLAGS_prompt),
                                        R"(", "seed": 1})");
  const int port = absl::GetFlag(FLAGS_http_port);
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    if (Grpc(*stub, request) < 0 || Http(port, body) < 0) {
      std::fprintf(stderr, "http_vs_grpc_bench: a warm-up request failed\n");
      return 1;
    }
  }
  std::vector<double> grpc_s, http_s, ratios;
  for (int pair = 0; pair < absl::GetFlag(FLAGS_pairs); ++pair) {
    double g, h;
    if (pair % 2 == 0) {  // ABBA: gRPC first in even pairs, HTTP first in odd ones
      g = Grpc(*stub, request);
      h = Http(port, body);
    } else {
      h = Http(port, body);
      g = Grpc(*stub, request);
    }
    if (g < 0 || h < 0) {
      std::fprintf(stderr, "http_vs_grpc_bench: a request failed in pair %d\n", pair);
      return 1;
    }
    grpc_s.push_back(g);
    http_s.push_back(h);
    ratios.push_back(h / g);
  }
  const double mean = std::accumulate(ratios.begin(), ratios.end(), 0.0) / ratios.size();
  std::printf("| front end | median s / request |\n|---|---:|\n");
  std::printf("| gRPC (final image only) | %.4f |\n| HTTP (b64_json) | %.4f |\n", Median(grpc_s),
              Median(http_s));
  std::printf("HTTP / gRPC over %zu ABBA pairs: median ratio %.4f, mean ratio %.4f\n",
              ratios.size(), Median(ratios), mean);
  return 0;
}
