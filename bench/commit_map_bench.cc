// What asking for the acceptance map (GenerateRequest.return_commit_map) adds to a request's
// latency on one running mulo_server (issue 64's bound: at most 1% for an ar request). Pairs of
// the same gRPC request (model, prompt, method, seed), one without the map and one with it, in
// ABBA order so that the machine's drift cancels; latency is from sending until the stream
// ends. Prints each side's median and the median and mean of the paired ratios with / without.
//   commit_map_bench --grpc=127.0.0.1:8001 --model=synth --method=ar --pairs=40
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/median.h"
#include "mulo/v1/image_generation.grpc.pb.h"

ABSL_FLAG(std::string, grpc, "127.0.0.1:8001", "the server's gRPC address");
ABSL_FLAG(std::string, model, "synth", "model family");
ABSL_FLAG(std::string, method, "ar", "ar, or another method's proto field name (e.g. mulo)");
ABSL_FLAG(std::string, prompt, "a large red circle in the center on a blue background", "prompt");
ABSL_FLAG(int, pairs, 40, "ABBA pairs (each pair: one request without the map, one with it)");
ABSL_FLAG(int, warmup, 4, "requests of each kind first, not measured");

namespace {

using mulo::bench::Median;
using Clock = std::chrono::steady_clock;

// One request read to its end: the seconds it took and the map's size, or -1 seconds.
struct Timed {
  double seconds = -1;
  size_t map_bytes = 0;
};
Timed Run(mulo::v1::ImageGeneration::Stub& stub, const mulo::v1::GenerateRequest& request) {
  const auto start = Clock::now();
  grpc::ClientContext context;
  auto reader = stub.Generate(&context, request);
  mulo::v1::GenerateResponse response;
  Timed timed;
  bool image = false;
  while (reader->Read(&response)) {
    if (response.has_image()) {
      image = true;
      timed.map_bytes = response.image().stats().commit_map().size();
    }
  }
  if (!reader->Finish().ok() || !image) return timed;
  timed.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return timed;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto stub = mulo::v1::ImageGeneration::NewStub(
      grpc::CreateChannel(absl::GetFlag(FLAGS_grpc), grpc::InsecureChannelCredentials()));
  mulo::v1::GenerateRequest without;
  without.set_model(absl::GetFlag(FLAGS_model));
  without.set_prompt(absl::GetFlag(FLAGS_prompt));
  without.mutable_sampling()->set_seed(1);
  without.mutable_stream()->set_rows(false);
  const auto* field = without.GetDescriptor()->FindFieldByName(absl::GetFlag(FLAGS_method));
  if (field == nullptr || field->containing_oneof() == nullptr) {
    std::fprintf(stderr, "commit_map_bench: --method=%s is not a method's field\n",
                 absl::GetFlag(FLAGS_method).c_str());
    return 1;
  }
  without.GetReflection()->MutableMessage(&without, field);
  mulo::v1::GenerateRequest with = without;
  with.set_return_commit_map(true);
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    if (Run(*stub, without).seconds < 0 || Run(*stub, with).seconds < 0) {
      std::fprintf(stderr, "commit_map_bench: a warm-up request failed\n");
      return 1;
    }
  }
  std::vector<double> plain_s, mapped_s, ratios;
  size_t map_bytes = 0, plain_bytes = 0;
  for (int pair = 0; pair < absl::GetFlag(FLAGS_pairs); ++pair) {
    Timed a, b;
    if (pair % 2 == 0) {  // ABBA: without first in even pairs, with first in odd ones
      a = Run(*stub, without);
      b = Run(*stub, with);
    } else {
      b = Run(*stub, with);
      a = Run(*stub, without);
    }
    if (a.seconds < 0 || b.seconds < 0) {
      std::fprintf(stderr, "commit_map_bench: a request failed in pair %d\n", pair);
      return 1;
    }
    plain_s.push_back(a.seconds);
    mapped_s.push_back(b.seconds);
    ratios.push_back(b.seconds / a.seconds);
    map_bytes = b.map_bytes;
    plain_bytes = std::max(plain_bytes, a.map_bytes);
  }
  const double mean = std::accumulate(ratios.begin(), ratios.end(), 0.0) / ratios.size();
  std::printf("| %s request | median s | map bytes |\n|---|---:|---:|\n",
              absl::GetFlag(FLAGS_method).c_str());
  std::printf("| without the map | %.4f | %zu |\n| with the map | %.4f | %zu |\n", Median(plain_s),
              plain_bytes, Median(mapped_s), map_bytes);
  std::printf("with / without over %zu ABBA pairs: median ratio %.4f, mean ratio %.4f\n",
              ratios.size(), Median(ratios), mean);
  return 0;
}
