// Fuzzes every RPC mulo_server exposes, not only its parsers (issue 38): an in-process server
// built as mulo_server builds it (GrpcFrontEnd over the tiny test family, the scheduler,
// metrics and service) is driven through a real loopback channel by a program the input
// encodes: open calls of any method (Generate, ListModels, GetModel, Health Check / Watch,
// reflection v1 and v1alpha, unknown methods), write valid messages (some cut or with a byte
// flipped) or raw bytes, half-close, cancel, read, await the end, up to four calls at once.
//
// After each input every call is cancelled, and the server must come back to rest: no call
// outlives its cancellation (the client sees every call end), no request still queued or
// decoding, no reflection stream open, and health answers SERVING. A crash, an abort inside
// gRPC, a sanitizer report or a broken invariant is a finding.
//
// Input format, one operation per step (at most kMaxOps), each byte read as needed (0 past the
// end): op = byte % 7 on slot = byte % kSlots, then
//   0 open     method = byte % methods, deadline = {none, 30 ms, 150 ms, 1 s}[byte % 4]
//   1 write    a valid message of the call's method: template = byte, cut / flip = 2 bytes
//   2 write    raw bytes: length = byte, then that many bytes
//   3 half-close;  4 cancel;  5 read, waiting byte % 20 ms
//   6 await the end for 100 ms x (1 + byte % 20): up to 2 s, long enough for a tiny image
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/model/model_set.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/reflection/v1/reflection.pb.h"
#include "mulo/v1/image_generation.pb.h"
#include "server/batch_policy.h"
#include "server/grpc_front_end.h"
#include "server/image_generation_service.h"
#include "server/model_repository.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"
#include "tests/server/raw_stream.h"

namespace {

using mulo::testing::RawStream;
using Wait = RawStream::Wait;

constexpr int kSlots = 4;
constexpr int kMaxOps = 48;

const char* const kMethods[] = {
    "/mulo.v1.ImageGeneration/Generate",
    "/mulo.v1.ImageGeneration/ListModels",
    "/mulo.v1.ImageGeneration/GetModel",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    "/mulo.v1.ImageGeneration/NoSuchMethod",
    "/no.such.Service/Method",
};
constexpr int kMethodCount = sizeof(kMethods) / sizeof(kMethods[0]);

[[noreturn]] void Finding(const char* what) {
  std::fprintf(stderr, "grpc_surface_fuzzer: %s\n", what);
  std::abort();
}

// Valid messages per method (by index in kMethods): the fuzzer reaches decoding, streaming and
// reflection answers through these, and their cut / flipped forms probe the parsers.
std::vector<std::vector<std::string>> Templates() {
  std::vector<std::vector<std::string>> templates(kMethodCount);
  auto generate = [](const std::function<void(mulo::v1::GenerateRequest*)>& set) {
    mulo::v1::GenerateRequest request;
    request.set_model("tiny");
    request.set_prompt("a small red circle in the top left on a blue background");
    request.mutable_sampling()->set_seed(5);
    set(&request);
    return request.SerializeAsString();
  };
  templates[0] = {
      generate([](auto*) {}),
      generate([](auto* r) { r->mutable_stream()->set_preview_every_rows(4); }),
      generate([](auto* r) { r->mutable_speculative()->set_gamma(4); }),
      generate([](auto* r) { r->mutable_mulo()->set_tau(0.5); }),
      generate([](auto* r) {
        r->mutable_eagle()->set_total_tokens(8);
        r->mutable_eagle()->set_depth(3);
        r->mutable_eagle()->set_top_k(2);
      }),
      generate([](auto* r) { r->mutable_sjd()->set_window(4); }),
      generate([](auto* r) { r->mutable_zipar()->set_window(2); }),
      generate([](auto* r) { r->set_model("no-such-model"); }),
      generate([](auto* r) { r->mutable_sampling()->set_temperature(-1); }),
  };
  templates[1] = {""};
  mulo::v1::GetModelRequest get;
  get.set_name("tiny");
  templates[2] = {get.SerializeAsString(), ""};
  for (const char* service : {"", "mulo.v1.ImageGeneration", "no.such.Service"}) {
    grpc::health::v1::HealthCheckRequest check;
    check.set_service(service);
    templates[3].push_back(check.SerializeAsString());
  }
  templates[4] = templates[3];
  using grpc::reflection::v1::ServerReflectionRequest;
  std::vector<ServerReflectionRequest> reflection(6);
  reflection[0].set_list_services("");
  reflection[1].set_file_containing_symbol("mulo.v1.ImageGeneration");
  reflection[2].set_file_by_filename("mulo/v1/image_generation.proto");
  reflection[3].mutable_file_containing_extension()->set_containing_type("mulo.v1.GenerateRequest");
  reflection[4].set_all_extension_numbers_of_type("mulo.v1.GenerateRequest");
  reflection[5].set_host("localhost");  // no request: answered with an error response
  for (const auto& r : reflection) templates[5].push_back(r.SerializeAsString());
  templates[6] = templates[5];
  templates[7] = {""};
  templates[8] = {""};
  return templates;
}

// The server under test, built once per process as mulo_server builds it.
struct Harness {
  std::unique_ptr<mulo::server::ModelRepository> repository;
  std::unique_ptr<mulo::server::Scheduler> scheduler;
  std::unique_ptr<mulo::server::ServerMetrics> metrics;
  std::unique_ptr<mulo::server::GenerationService> generation;
  std::unique_ptr<mulo::server::ImageGenerationService> service;
  std::unique_ptr<mulo::server::GrpcFrontEnd> front_end;
  std::shared_ptr<grpc::Channel> channel;
  std::vector<std::vector<std::string>> templates;
};

// Deliberately never destroyed: libFuzzer exits from inside its loop.
Harness* harness = nullptr;

void StartHarness() {
  auto* h = new Harness();
  mulo::engine::SetCpuThreads(1);
  auto repository =
      mulo::server::ModelRepository::Load("tests/data/repository", mulo::engine::LoadOptions());
  if (!repository.ok()) Finding("cannot load tests/data/repository (run from the repository root)");
  h->repository = *std::move(repository);
  mulo::server::Scheduler::Options options;
  options.workers = 1;
  options.max_batch = 4;
  options.on_worker_start = [] { mulo::engine::SetCpuThreads(1); };
  h->scheduler = std::make_unique<mulo::server::Scheduler>(options);
  h->metrics = std::make_unique<mulo::server::ServerMetrics>();
  auto batching = mulo::server::BatchPolicy::Parse("ar,mulo");
  h->generation = std::make_unique<mulo::server::GenerationService>(*h->scheduler, *h->metrics,
                                                                    *std::move(batching));
  h->service = std::make_unique<mulo::server::ImageGenerationService>(*h->generation);
  mulo::server::GrpcFrontEndOptions grpc_options;
  grpc_options.address = "127.0.0.1:0";
  auto front_end = mulo::server::GrpcFrontEnd::Start(grpc_options, h->service.get());
  if (!front_end.ok()) Finding("cannot start the gRPC front end");
  h->front_end = *std::move(front_end);
  h->generation->SetRepository(h->repository.get());
  h->front_end->SetServing(true);
  h->channel = mulo::testing::LoopbackChannel(h->front_end->port());
  h->templates = Templates();
  harness = h;
}

class Program {
 public:
  Program(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(at_, size_));
    std::string bytes(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return bytes;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

struct Call {
  int method = 0;
  std::unique_ptr<RawStream> stream;
};

std::string Mutated(std::string message, uint8_t how, uint8_t where) {
  if (message.empty() || how < 128) return message;
  const size_t at = where % message.size();
  if (how < 192) return message.substr(0, at);                        // cut
  message[at] = static_cast<char>(message[at] ^ (1 + (how & 0x3f)));  // flip
  return message;
}

// Waits up to `limit` for `settled`; false if it never held.
template <typename Predicate>
bool Within(std::chrono::milliseconds limit, Predicate settled) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!settled()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

bool HealthServing() {
  RawStream check(harness->channel, kMethods[3], Wait(5000));
  if (!check.Write("", Wait(5000))) return false;
  check.WritesDone(Wait(5000));
  const auto reply = check.Read(Wait(5000));
  grpc::health::v1::HealthCheckResponse response;
  return reply && response.ParseFromString(*reply) &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// What one input may spend waiting on its operations, all together: well inside libFuzzer's
// per-input timeout (tools/fuzz.sh: 10 s), so only the server can make an input slow.
constexpr Wait kWaitBudget{4000};

void Run(Program& program) {
  Call calls[kSlots];
  Wait budget = kWaitBudget;
  auto spend = [&budget](Wait want) {
    const Wait granted = std::min(want, budget);
    budget -= granted;
    return granted;
  };
  for (int op = 0; op < kMaxOps && !program.done(); ++op) {
    const uint8_t code = program.Byte();
    Call& call = calls[program.Byte() % kSlots];
    if (code % 7 == 0) {
      call.method = program.Byte() % kMethodCount;
      const int deadlines_ms[] = {0, 30, 150, 1000};
      call.stream.reset();  // a call still open in this slot is cancelled first
      call.stream = std::make_unique<RawStream>(harness->channel, kMethods[call.method],
                                                Wait(deadlines_ms[program.Byte() % 4]));
      continue;
    }
    if (call.stream == nullptr) continue;
    RawStream& stream = *call.stream;
    switch (code % 7) {
      case 1: {
        const auto& templates = harness->templates[call.method];
        const std::string& message = templates[program.Byte() % templates.size()];
        const uint8_t how = program.Byte();
        stream.Write(Mutated(message, how, program.Byte()), spend(Wait(50)));
        break;
      }
      case 2:
        stream.Write(program.Bytes(program.Byte()), spend(Wait(50)));
        break;
      case 3:
        stream.WritesDone(spend(Wait(50)));
        break;
      case 4:
        stream.Cancel();
        break;
      case 5:
        stream.Read(spend(Wait(program.Byte() % 20)));
        break;
      case 6:
        stream.Finish(spend(Wait(100 * (1 + program.Byte() % 20))));
        break;
    }
  }
  // Every call ends: the client cancels what is still open and must see each end.
  for (Call& call : calls) {
    if (call.stream == nullptr || call.stream->finished()) continue;
    call.stream->Cancel();
    if (!call.stream->Finish(Wait(10 * 1000))) Finding("a cancelled call never ended");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  StartHarness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Program program(data, size);
  Run(program);
  // The server comes back to rest: a cancelled request stops within one decoding step.
  if (!Within(std::chrono::seconds(5), [] {
        return harness->scheduler->running() == 0 && harness->scheduler->queue_depth() == 0;
      })) {
    Finding("a request outlived its call: still queued or decoding 5 s after every call ended");
  }
  if (!Within(std::chrono::seconds(5),
              [] { return harness->front_end->reflection_v1().open_streams() == 0; })) {
    Finding("a reflection v1 stream outlived its call");
  }
  if (!HealthServing()) Finding("health no longer answers SERVING");
  return 0;
}
