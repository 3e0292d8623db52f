// mulo_client: talks to mulo_server.
//
//   mulo_client generate --prompt="a small red circle in the top left on a blue
//   background"
//                        --method=ar --seed=1 --out=image.png
//   mulo_client models
//   mulo_client bench --requests=32 --concurrency=4
//   [--prompts_file=models/synth/heldout_prompts.jsonl]
//
// `generate` draws a live progress bar from the streamed rows, writes the image
// and prints the request's Stats. On error it prints the server's status code
// and message and exits 1.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/method_text.h"
#include "client/percentile.h"
#include "client/retry_policy.h"
#include "mulo/v1/image_generation.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:8001", "mulo_server address (host:port)");
ABSL_FLAG(std::string, model, "synth", "model family to use");
ABSL_FLAG(std::string, prompt, "", "text prompt");
ABSL_FLAG(std::string, condition_tokens, "",
          "Tar: TA-Tok ids instead of a prompt: a list (\"12,7,...\") or @FILE; every integer "
          "counts, so a Tar MLLM's \"<I12><I7>...\" output works as it is");
ABSL_FLAG(std::string, condition, "",
          "condition features instead of a prompt (e.g. LlamaGen t2i's T5 features): @FILE "
          "of whitespace-separated floats, row-major [rows, width] (ModelInfo condition_rows, "
          "condition_width)");
ABSL_FLAG(int, caption_length, 0,
          "with --condition on a t2i model: the real caption rows, at the end of the window "
          "(0 = all)");
ABSL_FLAG(std::string, text_stage_method, "",
          "Tar with --prompt: the method that decodes the MLLM's TA-Tok ids (ar, sjd, mc_sjd, "
          "sjd_pac; empty = the server's default, ar)");
ABSL_FLAG(int, class_label, -1,
          "LlamaGen c2i: the class to draw, [0, the model's classes) (-1 = none sent)");
ABSL_FLAG(std::string, method, "ar",
          "decoding method and its options, method:name=value:... (e.g. "
          "lantern:k=4:delta=0.2:tree.static_tree=true); every method's options are listed in "
          "the usage above; options left out take the family's defaults, and `models` shows "
          "which methods a family can run");
ABSL_FLAG(uint64_t, seed, 0, "sampling seed");
ABSL_FLAG(double, cfg_scale, -1, "CFG scale (-1 = the model's default)");
ABSL_FLAG(double, temperature, -1, "sampling temperature (-1 = default 1.0; 0 = greedy)");
ABSL_FLAG(int, top_k, 0, "top-k (0 = off)");
ABSL_FLAG(double, top_p, -1, "top-p (-1 = default 1.0)");
ABSL_FLAG(std::string, format, "png", "png, jpeg or raw");
ABSL_FLAG(bool, stream_rows, true,
          "ask for rows as they are committed (the progress bar); false = only the final image");
ABSL_FLAG(std::string, out, "image.png", "where to write the image");
ABSL_FLAG(double, timeout, 300, "request deadline in seconds");
ABSL_FLAG(std::string, tls_ca, "", "PEM root certificate: connect with TLS");
ABSL_FLAG(int, max_attempts, 5,
          "tries per call when the server answers UNAVAILABLE before any response (a replica "
          "draining or restarting); gRPC's retry policy backs off 0.1 s, 0.2 s, ... up to 2 s "
          "between them. 1 = no retries, at most 5");
ABSL_FLAG(int, requests, 32, "bench: requests to send");
ABSL_FLAG(int, concurrency, 1, "bench: requests in flight at once");
ABSL_FLAG(std::string, prompts_file, "",
          "bench: JSONL with a \"prompt\" per line (e.g. "
          "models/synth/heldout_prompts.jsonl); "
          "request i uses line i and seed --seed + i (as methods_bench does); "
          "empty = --prompt for "
          "every request. The method and sampling flags of generate apply");

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
  // Retries are gRPC's own (a service-config retry policy), not a loop here: the library
  // retries only while nothing of the response has arrived, so a retried Generate never
  // repeats a streamed row. The same JSON works for any gRPC client (README, "Deployment").
  const int attempts = absl::GetFlag(FLAGS_max_attempts);
  if (attempts > 1) args.SetServiceConfigJSON(mulo::client::RetryServiceConfig(attempts));
  return grpc::CreateCustomChannel(absl::GetFlag(FLAGS_server), credentials, args);
}

int Fail(const grpc::Status& status) {
  // gRPC's codes are absl's, number for number.
  std::fprintf(stderr, "error: %s: %s\n",
               absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())).c_str(),
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

// Every integer in `spec` (or in the file it names with a leading '@'), in order.
bool ParseConditionTokens(const std::string& spec, std::vector<uint32_t>* ids) {
  std::string text = spec;
  if (!spec.empty() && spec[0] == '@') {
    std::ifstream in(spec.substr(1));
    if (!in) {
      std::cerr << "--condition_tokens: cannot read " << spec.substr(1) << "\n";
      return false;
    }
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t value = 0;
  bool in_number = false;
  for (char ch : text + " ") {
    if (ch >= '0' && ch <= '9') {
      value = value * 10 + static_cast<uint64_t>(ch - '0');
      if (value > UINT32_MAX) {
        std::cerr << "--condition_tokens: an id does not fit 32 bits\n";
        return false;
      }
      in_number = true;
    } else if (in_number) {
      ids->push_back(static_cast<uint32_t>(value));
      value = 0;
      in_number = false;
    }
  }
  if (ids->empty()) std::cerr << "--condition_tokens: no ids in " << spec << "\n";
  return !ids->empty();
}

// The floats of `spec` ("@FILE", whitespace-separated).
bool ParseConditionFeatures(const std::string& spec, std::vector<float>* values) {
  if (spec.empty() || spec[0] != '@') {
    std::cerr << "--condition: expected @FILE\n";
    return false;
  }
  std::ifstream in(spec.substr(1));
  if (!in) {
    std::cerr << "--condition: cannot read " << spec.substr(1) << "\n";
    return false;
  }
  float x;
  while (in >> x) values->push_back(x);
  if (!in.eof() || values->empty()) {
    std::cerr << "--condition: " << spec.substr(1) << " is not a list of floats\n";
    return false;
  }
  return true;
}

// The request the flags describe, for one prompt and seed; false (after printing why) when a
// flag names something this client does not know.
bool BuildRequest(const std::string& prompt, uint64_t seed,
                  mulo::v1::GenerateRequest* request) {
  request->set_model(absl::GetFlag(FLAGS_model));
  request->set_prompt(prompt);
  if (!absl::GetFlag(FLAGS_condition_tokens).empty()) {
    std::vector<uint32_t> ids;
    if (!ParseConditionTokens(absl::GetFlag(FLAGS_condition_tokens), &ids)) return false;
    request->mutable_condition_tokens()->Add(ids.begin(), ids.end());
  }
  if (!absl::GetFlag(FLAGS_condition).empty()) {
    std::vector<float> values;
    if (!ParseConditionFeatures(absl::GetFlag(FLAGS_condition), &values)) return false;
    request->mutable_condition()->Add(values.begin(), values.end());
  }
  request->set_caption_length(
      static_cast<uint32_t>(std::max(0, absl::GetFlag(FLAGS_caption_length))));
  request->set_text_stage_method(absl::GetFlag(FLAGS_text_stage_method));
  if (absl::GetFlag(FLAGS_class_label) >= 0) {
    request->set_class_label(static_cast<uint32_t>(absl::GetFlag(FLAGS_class_label)));
  }
  auto* sampling = request->mutable_sampling();
  sampling->set_seed(seed);
  if (absl::GetFlag(FLAGS_cfg_scale) >= 0) sampling->set_cfg_scale(absl::GetFlag(FLAGS_cfg_scale));
  if (absl::GetFlag(FLAGS_temperature) >= 0) {
    sampling->set_temperature(absl::GetFlag(FLAGS_temperature));
  }
  sampling->set_top_k(absl::GetFlag(FLAGS_top_k));
  if (absl::GetFlag(FLAGS_top_p) >= 0) sampling->set_top_p(absl::GetFlag(FLAGS_top_p));
  request->mutable_stream()->set_rows(absl::GetFlag(FLAGS_stream_rows));
  if (absl::Status set = mulo::client::SetMethodFromText(absl::GetFlag(FLAGS_method), request);
      !set.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(set.message()).c_str());
    return false;
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  request->set_image_format(format == "jpeg"  ? mulo::v1::JPEG
                            : format == "raw" ? mulo::v1::RAW_RGB
                                              : mulo::v1::PNG);
  return true;
}

// The image's decoding statistics, as the server reported them.
void PrintStats(const mulo::v1::Stats& s) {
  if (!s.method().empty()) std::printf("method %s\n", s.method().c_str());
  if (!s.method_choice().empty()) std::printf("%s\n", s.method_choice().c_str());
  std::printf("target forwards %u, draft forwards %u, step compression %.2f",
              s.target_forward_passes(), s.draft_forward_passes(), s.step_compression());
  if (s.iterations() > 0) std::printf(", iterations %u", s.iterations());
  if (s.mean_tree_depth() > 0) {
    std::printf(", mean tree depth %.2f", s.mean_tree_depth());
    if (s.mean_tree_width() > 0) std::printf(" width %.2f", s.mean_tree_width());
  }
  if (s.drafted_tokens() > 0) {
    std::printf(", acceptance %.3f (%u/%u drafted), resampled %u", s.acceptance_rate(),
                s.accepted_tokens(), s.drafted_tokens(), s.resampled_tokens());
  }
  if (s.mean_accepted_length() > 0) {
    std::printf(", mean accepted length %.2f", s.mean_accepted_length());
  }
  if (s.relaxed_accepted_tokens() > 0) {
    std::printf(", relaxed accepts %u", s.relaxed_accepted_tokens());
  }
  if (s.pooled_drafts() > 0) {
    std::printf(", pooled sets %u (mean size - 1 %.2f)", s.pooled_drafts(),
                s.mean_pooled_neighbors());
  }
  if (s.text_stage_tokens() > 0) {
    std::printf(", text stage %u tokens in %u forwards", s.text_stage_tokens(),
                s.text_stage_forward_passes());
  }
  std::printf("\nphases:");
  for (const auto& [phase, t] : s.phase_seconds()) std::printf(" %s=%.3fs", phase.c_str(), t);
  std::printf("\n");
}

int Generate() {
  if (absl::GetFlag(FLAGS_prompt).empty() && absl::GetFlag(FLAGS_condition_tokens).empty() &&
      absl::GetFlag(FLAGS_condition).empty() && absl::GetFlag(FLAGS_class_label) < 0) {
    std::fprintf(stderr,
                 "error: --prompt (or --condition_tokens, --condition, --class_label) is "
                 "required\n");
    return 2;
  }
  mulo::v1::GenerateRequest request;
  if (!BuildRequest(absl::GetFlag(FLAGS_prompt), absl::GetFlag(FLAGS_seed), &request)) return 2;

  auto stub = ImageGeneration::NewStub(Connect());
  grpc::ClientContext context;
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_timeout) * 1000)));
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
  std::printf(
      "latency %.3fs (first row %.3fs, server queue %.3fs, server "
      "decode %.3fs)\n",
      seconds(), first_row, s.queue_seconds(), s.total_seconds());
  PrintStats(s);
  return 0;
}

// The "prompt" field of each JSONL line (a tiny scan; the lines are written by
// our tools).
std::vector<std::string> ReadPrompts(const std::string& path) {
  std::vector<std::string> prompts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const std::string key = "\"prompt\":\"";
    auto start = line.find(key);
    if (start == std::string::npos) continue;
    start += key.size();
    prompts.push_back(line.substr(start, line.find('"', start) - start));
  }
  return prompts;
}

using mulo::client::Percentile;

struct BenchResult {
  grpc::Status status;
  double latency = 0, first_row = -1;  // seconds; first_row -1: no rows streamed
  mulo::v1::Stats stats;
};

// The bench's request `i`: its prompt, seed --seed + i, timed from send to the final status.
BenchResult BenchOne(ImageGeneration::Stub& stub, const std::string& prompt, int i) {
  mulo::v1::GenerateRequest request;
  BuildRequest(prompt, absl::GetFlag(FLAGS_seed) + i, &request);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(static_cast<int64_t>(absl::GetFlag(FLAGS_timeout))));
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  BenchResult result;
  auto reader = stub.Generate(&context, request);
  mulo::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_rows() && result.first_row < 0) result.first_row = since();
    if (response.has_image()) result.stats = response.image().stats();
  }
  result.status = reader->Finish();
  result.latency = since();
  return result;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / v.size();
}

// Closed-loop load: `concurrency` workers each send their next request as soon
// as the last one finishes. Prints latency percentiles, throughput and the
// server's own decode time, so the server's overhead (queueing excluded) is
// latency - decode.
int Bench() {
  const int n = absl::GetFlag(FLAGS_requests);
  const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
  std::vector<std::string> prompts;
  if (!absl::GetFlag(FLAGS_prompts_file).empty()) {
    prompts = ReadPrompts(absl::GetFlag(FLAGS_prompts_file));
  }
  if (prompts.empty()) {
    if (absl::GetFlag(FLAGS_prompt).empty()) {
      std::fprintf(stderr, "error: bench needs --prompt or --prompts_file\n");
      return 2;
    }
    prompts.push_back(absl::GetFlag(FLAGS_prompt));
  }
  mulo::v1::GenerateRequest probe;
  if (!BuildRequest(prompts[0], 0, &probe)) return 2;  // reports a bad --method once
  auto channel = Connect();
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<double> latency, decode, queue, first_row;
  std::vector<std::string> errors;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      auto stub = ImageGeneration::NewStub(channel);
      for (int i = next++; i < n; i = next++) {
        const BenchResult r = BenchOne(*stub, prompts[i % prompts.size()], i);
        std::lock_guard<std::mutex> lock(mu);
        if (!r.status.ok()) {
          errors.push_back(r.status.error_message());
          continue;
        }
        latency.push_back(r.latency);
        decode.push_back(r.stats.total_seconds());
        queue.push_back(r.stats.queue_seconds());
        if (r.first_row >= 0) first_row.push_back(r.first_row);  // none without --stream_rows
      }
    });
  }
  for (auto& w : workers) w.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (latency.empty()) {
    std::fprintf(stderr, "error: every request failed, e.g. %s\n",
                 errors.empty() ? "?" : errors[0].c_str());
    return 1;
  }
  const auto mean = Mean;
  std::vector<double> overhead;
  for (size_t i = 0; i < latency.size(); ++i) overhead.push_back(latency[i] - queue[i] - decode[i]);
  std::printf(
      "| requests | concurrency | ok | errors | mean latency s | p50 "
      "latency s | p95 latency s"
      " | mean first row s | images/s | mean server decode s"
      " | mean overhead s (latency - queue - decode) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::string first_row_s =
      first_row.empty() ? "-" : absl::StrFormat("%.3f", mean(first_row));
  std::printf(
      "| %d | %d | %zu | %zu | %.3f | %.3f | %.3f | %s | %.2f | %.3f "
      "| %.4f (%.2f%%) |\n",
      n, concurrency, latency.size(), errors.size(), mean(latency), Percentile(latency, 0.5),
      Percentile(latency, 0.95), first_row_s.c_str(), latency.size() / wall, mean(decode),
      mean(overhead), 100.0 * mean(overhead) / mean(latency));
  if (!errors.empty()) std::fprintf(stderr, "first error: %s\n", errors[0].c_str());
  return errors.empty() ? 0 : 1;
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
    std::string conditions;
    for (const auto& x : m.conditions()) {
      absl::StrAppend(&conditions, conditions.empty() ? "" : ",", x);
    }
    // A family that reads the prompt's own ids (Janus-Pro) has rows but no feature width.
    const std::string shape =
        m.num_classes() > 0          ? absl::StrCat(m.num_classes(), " classes")
        : m.condition_width() == 0 ? absl::StrCat("up to ", m.condition_rows(), " prompt tokens")
                                     : absl::StrCat(m.condition_rows(), " x ", m.condition_width());
    std::printf("%s  %ux%u px  grid %ux%u  vocab %u  methods %s  cfg %.1f  conditions %s (%s)\n",
                m.name().c_str(), m.image_width(), m.image_height(), m.grid_size(), m.grid_size(),
                m.vocab_size(), methods.c_str(), m.default_sampling().cfg_scale(),
                conditions.c_str(), shape.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists this program's own flags (defined under client/), not every library's.
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "client/");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(absl::StrCat(
      "mulo_client generate --prompt=... [--method=ar --seed=N --out=image.png] | models | "
      "bench\n  --method=method:name=value:..., the methods of the API and their options:\n",
      mulo::client::MethodOptionsHelp()));
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "generate") return Generate();
  if (command == "models") return Models();
  if (command == "bench") return Bench();
  std::fprintf(stderr,
               "usage: mulo_client generate --prompt=... | --condition_tokens=... | models | "
               "bench\n");
  return 2;
}
