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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/percentile.h"
#include "client/retry_policy.h"
#include "mulo/v1/image_generation.grpc.pb.h"
#include "mulo/v1/method_names.h"

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
ABSL_FLAG(int, class_label, -1,
          "LlamaGen c2i: the class to draw, [0, the model's classes) (-1 = none sent)");
ABSL_FLAG(std::string, method, "ar",
          "decoding method: any of the API's (listed in the usage above; `models` shows which "
          "each model runs). Method parameters left unset take the server's defaults");
ABSL_FLAG(int, gamma, 0, "speculative: draft tokens per step");
ABSL_FLAG(bool, static_tree, false,
          "eagle, lantern: EAGLE-1's static tree instead of EAGLE-2's dynamic one");
ABSL_FLAG(int, total_tokens, 0,
          "eagle, lantern, peanut: dynamic tree nodes verified per step");
ABSL_FLAG(int, tree_depth, 0, "eagle, lantern, peanut (initial): dynamic tree expansions");
ABSL_FLAG(int, tree_top_k, 0, "eagle, lantern, peanut (initial): children per expanded node");
ABSL_FLAG(std::string, preset, "family",
          "mulo: defaults of the unset parameters: family (the model's calibrated defaults) or "
          "paper (the MuLo-SD paper's settings)");
ABSL_FLAG(double, tau, 0, "mulo: acceptance threshold");
ABSL_FLAG(std::string, pooling, "", "mulo: additive, multiplicative or none");
ABSL_FLAG(int, k, 0, "mulo, lantern, lantern++: latent neighbours pooled besides the draft");
ABSL_FLAG(double, delta, 0,
          "mulo, lantern: additive pooling bound; peanut: LANTERN's delta on its trees "
          "(0 = lossless)");
ABSL_FLAG(double, lambda, 0, "mulo, lantern++: multiplicative pooling factor");
ABSL_FLAG(int, radius, 0, "mulo: local expansion radius");
ABSL_FLAG(int, draft_rows, 0, "mulo: drafter rows per step");
ABSL_FLAG(bool, raster, false, "mulo: raster-scan rejection instead of local expansion");
ABSL_FLAG(std::string, draft_prefix, "",
          "mulo: the drafter's prefix: downsampled (the paper's D_r), keep_drafted, patch or own");
ABSL_FLAG(bool, keep_drafted_prefix, false, "mulo: same as --draft_prefix=keep_drafted");
ABSL_FLAG(std::string, resample, "",
          "mulo: how rejected positions are re-sampled: sequential (the paper's), parallel or "
          "wavefront");
ABSL_FLAG(int, resample_window, 0, "mulo: with --resample=wavefront, ZipAR's window");
ABSL_FLAG(int, parallel_radius, 0,
          "mulo: with --resample=parallel, the 2D reach within which re-samples stay sequential");
ABSL_FLAG(double, draft_cfg_scale, 0, "mulo: the drafter's guidance scale");
ABSL_FLAG(int, zipar_window, 0,
          "mulo: advance the drafter's rows as ZipAR's wavefront with this window (0 = off)");
ABSL_FLAG(double, draft_temperature, 0, "mulo: the drafter's temperature");
ABSL_FLAG(int, window, 0,
          "sjd, gsd: draft tokens per Jacobi iteration; zipar: tokens of a row before the next "
          "row starts (the grid width is plain AR)");
ABSL_FLAG(std::string, init, "",
          "sjd: new window tokens: random or repeat_horizon; peanut: where a tree's shape "
          "starts: horizontal_repeat, vertical_repeat or random");
ABSL_FLAG(double, beta, 0, "peanut: positive threshold on a tree's acceptance rate");
ABSL_FLAG(int, l_d, 0, "peanut: depth adaptation step");
ABSL_FLAG(int, l_k, 0, "peanut: width adaptation step");
ABSL_FLAG(int, min_depth, 0, "peanut: open lower bound of the adapted depth");
ABSL_FLAG(int, max_depth, 0, "peanut: open upper bound of the adapted depth");
ABSL_FLAG(int, min_top_k, 0, "peanut: open lower bound of the adapted width");
ABSL_FLAG(int, max_top_k, 0, "peanut: open upper bound of the adapted width");
ABSL_FLAG(int, group_size, 0, "gsd: tokens ranked around the draft that may join its group");
ABSL_FLAG(double, max_probability_gap, 0, "gsd: a group member's largest |p(y) - p(x)|");
ABSL_FLAG(double, max_embedding_distance, 0,
          "gsd: a group member's largest squared embedding distance to the draft");
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

// The request the flags describe, for one prompt and seed; false (after
// printing why) when a flag names something this client does not know.
// The flags the user gave: method parameters left out take the server's defaults, which the
// engine writes once.
class GivenFlags {
 public:
  GivenFlags(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      absl::string_view arg = argv[i];
      if (!absl::ConsumePrefix(&arg, "--")) continue;
      names_.insert(std::string(arg.substr(0, arg.find('='))));
    }
  }
  bool Has(const std::string& name) const { return names_.count(name) > 0; }

 private:
  std::set<std::string> names_;
};

// Every method the wire contract declares, for messages and the usage text.
std::string MethodNames() { return absl::StrJoin(mulo::v1::ApiMethodNames(), ", "); }

// Selects --method in the request's oneof and copies the parameter flags that were given.
bool SetMethod(const std::string& method, const GivenFlags& given,
               mulo::v1::GenerateRequest* request) {
  const auto* field = mulo::v1::ApiMethodField(method);
  if (field == nullptr) {
    std::fprintf(stderr, "error: --method=%s is not a method of the API (%s)\n", method.c_str(),
                 MethodNames().c_str());
    return false;
  }
  request->GetReflection()->MutableMessage(request, field);  // sets the oneof case
  if (request->has_speculative() && given.Has("gamma")) {
    request->mutable_speculative()->set_gamma(absl::GetFlag(FLAGS_gamma));
  }
  // Enum flags by their proto value names (lower case), so both lists stay one; an unknown
  // value is refused listing the known ones.
  auto set_enum = [&](const char* flag, const google::protobuf::EnumDescriptor* type,
                      const std::string& value, auto set) {
    const auto* found = type->FindValueByName(absl::AsciiStrToUpper(value));
    if (found == nullptr || found->number() == 0) {
      std::vector<std::string> known;
      for (int i = 0; i < type->value_count(); ++i) {
        const auto* v = type->value(i);
        if (v->number() != 0) known.push_back(absl::AsciiStrToLower(v->name()));
      }
      std::fprintf(stderr, "error: --%s=%s is not known (%s)\n", flag, value.c_str(),
                   absl::StrJoin(known, ", ").c_str());
      return false;
    }
    set(found->number());
    return true;
  };
  auto set_tree = [&](mulo::v1::EagleParams* e) {
    e->set_static_tree(absl::GetFlag(FLAGS_static_tree));
    if (given.Has("total_tokens")) e->set_total_tokens(absl::GetFlag(FLAGS_total_tokens));
    if (given.Has("tree_depth")) e->set_depth(absl::GetFlag(FLAGS_tree_depth));
    if (given.Has("tree_top_k")) e->set_top_k(absl::GetFlag(FLAGS_tree_top_k));
  };
  if (request->has_eagle()) set_tree(request->mutable_eagle());
  if (request->has_lantern()) {
    auto* l = request->mutable_lantern();
    if (given.Has("k")) l->set_k(absl::GetFlag(FLAGS_k));
    if (given.Has("delta")) l->set_delta(absl::GetFlag(FLAGS_delta));
    if (given.Has("static_tree") || given.Has("total_tokens") || given.Has("tree_depth") ||
        given.Has("tree_top_k")) {
      set_tree(l->mutable_tree());
    }
  }
  if (request->has_lantern_plus_plus()) {
    auto* l = request->mutable_lantern_plus_plus();
    if (given.Has("k")) l->set_k(absl::GetFlag(FLAGS_k));
    if (given.Has("lambda")) l->set_lambda(absl::GetFlag(FLAGS_lambda));
  }
  if (request->has_peanut()) {
    auto* q = request->mutable_peanut();
    if (given.Has("beta")) q->set_beta(absl::GetFlag(FLAGS_beta));
    if (given.Has("l_d")) q->set_l_d(absl::GetFlag(FLAGS_l_d));
    if (given.Has("l_k")) q->set_l_k(absl::GetFlag(FLAGS_l_k));
    if (given.Has("min_depth")) q->set_min_depth(absl::GetFlag(FLAGS_min_depth));
    if (given.Has("max_depth")) q->set_max_depth(absl::GetFlag(FLAGS_max_depth));
    if (given.Has("min_top_k")) q->set_min_top_k(absl::GetFlag(FLAGS_min_top_k));
    if (given.Has("max_top_k")) q->set_max_top_k(absl::GetFlag(FLAGS_max_top_k));
    if (given.Has("delta")) q->set_lantern_delta(absl::GetFlag(FLAGS_delta));
    if (given.Has("total_tokens") || given.Has("tree_depth") || given.Has("tree_top_k")) {
      set_tree(q->mutable_tree());
    }
    using Q = mulo::v1::PeanutParams;
    if (given.Has("init") &&
        !set_enum("init", Q::Init_descriptor(), absl::GetFlag(FLAGS_init),
                  [&](int v) { q->set_init(static_cast<Q::Init>(v)); })) {
      return false;
    }
  }
  if (request->has_sjd()) {
    auto* j = request->mutable_sjd();
    if (given.Has("window")) j->set_window(absl::GetFlag(FLAGS_window));
    using J = mulo::v1::SjdParams;
    if (given.Has("init") &&
        !set_enum("init", J::Init_descriptor(), absl::GetFlag(FLAGS_init),
                  [&](int v) { j->set_init(static_cast<J::Init>(v)); })) {
      return false;
    }
  }
  if (request->has_gsd()) {
    auto* g = request->mutable_gsd();
    if (given.Has("window")) g->set_window(absl::GetFlag(FLAGS_window));
    if (given.Has("group_size")) g->set_group_size(absl::GetFlag(FLAGS_group_size));
    if (given.Has("max_probability_gap")) {
      g->set_max_probability_gap(absl::GetFlag(FLAGS_max_probability_gap));
    }
    if (given.Has("max_embedding_distance")) {
      g->set_max_embedding_distance(absl::GetFlag(FLAGS_max_embedding_distance));
    }
  }
  if (request->has_zipar() && given.Has("window")) {
    request->mutable_zipar()->set_window(absl::GetFlag(FLAGS_window));
  }
  if (request->has_mulo()) {
    auto* m = request->mutable_mulo();
    using P = mulo::v1::MuloParams;
    const std::string pooling = absl::GetFlag(FLAGS_pooling) == "none"
                                    ? "no_pooling" : absl::GetFlag(FLAGS_pooling);
    if (given.Has("preset") &&
        !set_enum("preset", P::Preset_descriptor(), absl::GetFlag(FLAGS_preset),
                  [&](int v) { m->set_preset(static_cast<P::Preset>(v)); })) {
      return false;
    }
    if (given.Has("pooling") &&
        !set_enum("pooling", P::Pooling_descriptor(), pooling,
                  [&](int v) { m->set_pooling(static_cast<P::Pooling>(v)); })) {
      return false;
    }
    if (given.Has("draft_prefix") &&
        !set_enum("draft_prefix", P::DraftPrefix_descriptor(), absl::GetFlag(FLAGS_draft_prefix),
                  [&](int v) { m->set_draft_prefix(static_cast<P::DraftPrefix>(v)); })) {
      return false;
    }
    if (given.Has("resample") &&
        !set_enum("resample", P::ResampleOrder_descriptor(), absl::GetFlag(FLAGS_resample),
                  [&](int v) { m->set_resample(static_cast<P::ResampleOrder>(v)); })) {
      return false;
    }
    if (given.Has("parallel_radius")) m->set_parallel_radius(absl::GetFlag(FLAGS_parallel_radius));
    if (given.Has("zipar_window")) m->set_zipar_window(absl::GetFlag(FLAGS_zipar_window));
    if (given.Has("resample_window")) {
      m->set_resample_window(absl::GetFlag(FLAGS_resample_window));
    }
    if (given.Has("tau")) m->set_tau(absl::GetFlag(FLAGS_tau));
    if (given.Has("k")) m->set_k(absl::GetFlag(FLAGS_k));
    if (given.Has("delta")) m->set_delta(absl::GetFlag(FLAGS_delta));
    if (given.Has("lambda")) m->set_lambda(absl::GetFlag(FLAGS_lambda));
    if (given.Has("radius")) m->set_radius(absl::GetFlag(FLAGS_radius));
    if (given.Has("draft_rows")) m->set_draft_rows(absl::GetFlag(FLAGS_draft_rows));
    if (given.Has("draft_cfg_scale")) m->set_draft_cfg_scale(absl::GetFlag(FLAGS_draft_cfg_scale));
    if (given.Has("draft_temperature")) {
      m->set_draft_temperature(absl::GetFlag(FLAGS_draft_temperature));
    }
    if (absl::GetFlag(FLAGS_raster)) m->set_rejection(P::RASTER);
    if (absl::GetFlag(FLAGS_keep_drafted_prefix)) m->set_draft_prefix(P::KEEP_DRAFTED);
  }
  return true;
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

bool BuildRequest(const std::string& prompt, uint64_t seed, const GivenFlags& given,
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
  if (!SetMethod(absl::GetFlag(FLAGS_method), given, request)) return false;
  const std::string format = absl::GetFlag(FLAGS_format);
  request->set_image_format(format == "jpeg"  ? mulo::v1::JPEG
                            : format == "raw" ? mulo::v1::RAW_RGB
                                              : mulo::v1::PNG);
  return true;
}

int Generate(const GivenFlags& given) {
  if (absl::GetFlag(FLAGS_prompt).empty() && absl::GetFlag(FLAGS_condition_tokens).empty() &&
      absl::GetFlag(FLAGS_condition).empty() && absl::GetFlag(FLAGS_class_label) < 0) {
    std::fprintf(stderr,
                 "error: --prompt (or --condition_tokens, --condition, --class_label) is "
                 "required\n");
    return 2;
  }
  mulo::v1::GenerateRequest request;
  if (!BuildRequest(absl::GetFlag(FLAGS_prompt), absl::GetFlag(FLAGS_seed), given, &request)) return 2;

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
  std::printf("\nphases:");
  for (const auto& [phase, t] : s.phase_seconds()) std::printf(" %s=%.3fs", phase.c_str(), t);
  std::printf("\n");
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

// Closed-loop load: `concurrency` workers each send their next request as soon
// as the last one finishes. Prints latency percentiles, throughput and the
// server's own decode time, so the server's overhead (queueing excluded) is
// latency - decode.
int Bench(const GivenFlags& given) {
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
  if (!BuildRequest(prompts[0], 0, given, &probe)) return 2;  // reports a bad --method once
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
        mulo::v1::GenerateRequest request;
        BuildRequest(prompts[i % prompts.size()], absl::GetFlag(FLAGS_seed) + i, given, &request);
        grpc::ClientContext context;
        context.set_deadline(
            std::chrono::system_clock::now() +
            std::chrono::seconds(static_cast<int64_t>(absl::GetFlag(FLAGS_timeout))));
        const auto t0 = std::chrono::steady_clock::now();
        double t_first = -1;
        auto reader = stub->Generate(&context, request);
        mulo::v1::GenerateResponse response;
        mulo::v1::Stats stats;
        while (reader->Read(&response)) {
          if (response.has_rows() && t_first < 0) {
            t_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          }
          if (response.has_image()) stats = response.image().stats();
        }
        grpc::Status status = reader->Finish();
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu);
        if (!status.ok()) {
          errors.push_back(status.error_message());
          continue;
        }
        latency.push_back(t);
        decode.push_back(stats.total_seconds());
        queue.push_back(stats.queue_seconds());
        if (t_first >= 0) first_row.push_back(t_first);  // none without --stream_rows
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
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / v.size();
  };
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
    const std::string shape = m.num_classes() > 0
                                  ? absl::StrCat(m.num_classes(), " classes")
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
      "bench\n  methods of the API: ",
      MethodNames()));
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() > 1 ? args[1] : "";
  const GivenFlags given(argc, argv);
  if (command == "generate") return Generate(given);
  if (command == "models") return Models();
  if (command == "bench") return Bench(given);
  std::fprintf(stderr,
               "usage: mulo_client generate --prompt=... | --condition_tokens=... | models | "
               "bench\n");
  return 2;
}
