// Soak: starts mulo_server on a model repository and sends it thousands of requests of every
// method it serves, `--concurrency` at a time, with cancels and short deadlines mixed in.
// Prints the server's resident memory at intervals, latency percentiles per method and the
// count of every final status. Targets (issue 21): RSS growth under 2% after warm-up, and no
// status other than OK, CANCELLED, DEADLINE_EXCEEDED or UNAVAILABLE.
//
//   bazel-bin/bench/soak_bench --requests=4000        (the tiny test family, about 10 min)
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/percentile.h"
#include "mulo/v1/image_generation.grpc.pb.h"
#include "mulo/v1/method_names.h"

ABSL_FLAG(std::string, server_binary, "bazel-bin/server/mulo_server",
          "mulo_server to start (run from the repository root)");
ABSL_FLAG(std::string, model_repository, "tests/data/repository", "what it serves");
ABSL_FLAG(int, requests, 4000, "requests to send in all");
ABSL_FLAG(int, concurrency, 4, "requests in flight at once");
ABSL_FLAG(int, workers, 2, "the server's --workers");
ABSL_FLAG(double, cancel_share, 0.1, "share of requests the client cancels mid-stream");
ABSL_FLAG(double, short_deadline_share, 0.1,
          "share of requests with a deadline of 5-50 ms (most end DEADLINE_EXCEEDED)");
ABSL_FLAG(double, warmup_share, 0.1, "share of requests before the RSS baseline is taken");
ABSL_FLAG(int, samples, 20, "RSS samples over the run");

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = mulo::v1;

// mulo_server as a child process on free ports.
class Server {
 public:
  bool Start() {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDERR_FILENO);  // one log line per request: thousands
      const std::string repository = "--model_repository=" + absl::GetFlag(FLAGS_model_repository);
      const std::string workers = absl::StrCat("--workers=", absl::GetFlag(FLAGS_workers));
      const std::string binary = absl::GetFlag(FLAGS_server_binary);
      execl(binary.c_str(), binary.c_str(), repository.c_str(), workers.c_str(),
            "--host=127.0.0.1", "--port=0", "--metrics_port=0", "--http_port=0", "--max_queue=64", nullptr);
      _exit(127);
    }
    close(out[1]);
    FILE* text = fdopen(out[0], "r");
    char line[256];
    bool ok = false;  // the HTTP API's line comes first
    while (!ok && fgets(line, sizeof(line), text) != nullptr) {
      ok = sscanf(line, "mulo_server listening on port %d", &port_) == 1;
    }
    fclose(text);
    return ok;
  }
  ~Server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // VmRSS in MiB from /proc, 0 when unreadable.
  double RssMiB() const {
    std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) {
        double kb = 0;
        std::istringstream(line.substr(6)) >> kb;
        return kb / 1024.0;
      }
    }
    return 0.0;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// gRPC's codes are absl's, number for number.
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// How one request ends on purpose.
enum class Ending { kNormal, kCancel, kShortDeadline };

struct Outcome {
  std::string method;
  Ending ending = Ending::kNormal;
  grpc::StatusCode code = grpc::StatusCode::OK;
  double seconds = 0.0;
};

v1::GenerateRequest RequestFor(const std::string& model, const std::string& method,
                               uint64_t seed) {
  v1::GenerateRequest request;
  request.set_model(model);
  request.set_prompt("a small red circle in the top left on a blue background");
  request.mutable_sampling()->set_seed(seed);
  // The method's message, empty: the family's defaults.
  if (const auto* field = v1::ApiMethodField(method)) {
    request.GetReflection()->MutableMessage(&request, field);
  }
  return request;
}

Outcome Send(v1::ImageGeneration::Stub& stub, const v1::GenerateRequest& request,
             const std::string& method, Ending ending, std::mt19937_64& rng) {
  Outcome outcome{method, ending};
  grpc::ClientContext context;
  std::uniform_int_distribution<int> ms(5, 50);
  context.set_deadline(std::chrono::system_clock::now() +
                       (ending == Ending::kShortDeadline ? std::chrono::milliseconds(ms(rng))
                                                        : std::chrono::milliseconds(60000)));
  const auto start = Clock::now();
  auto reader = stub.Generate(&context, request);
  std::thread canceller;
  if (ending == Ending::kCancel) {
    const auto after = std::chrono::milliseconds(ms(rng));
    canceller = std::thread([&context, after] {
      std::this_thread::sleep_for(after);
      context.TryCancel();
    });
  }
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  outcome.code = reader->Finish().error_code();
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (canceller.joinable()) canceller.join();
  return outcome;
}

// The server's model list, once its models are loaded (up to a minute).
v1::ListModelsResponse WaitForModels(v1::ImageGeneration::Stub& stub) {
  v1::ListModelsResponse models;
  for (int attempt = 0; attempt < 600; ++attempt) {
    grpc::ClientContext context;
    if (stub.ListModels(&context, v1::ListModelsRequest(), &models).ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return models;
}

// The statuses and each method's latency percentiles; true when a status other than OK,
// CANCELLED, DEADLINE_EXCEEDED or UNAVAILABLE came back.
bool PrintOutcomes(const std::vector<Outcome>& outcomes) {
  std::map<std::string, int> codes;
  std::map<std::string, std::vector<double>> latency;  // OK requests of normal endings
  for (const Outcome& o : outcomes) {
    ++codes[CodeName(o.code)];
    if (o.code == grpc::StatusCode::OK && o.ending == Ending::kNormal) {
      latency[o.method].push_back(o.seconds);
    }
  }
  std::printf("| status | requests |\n|---|---:|\n");
  bool unexpected = false;
  for (const auto& [name, count] : codes) {
    std::printf("| %s | %d |\n", name.c_str(), count);
    unexpected |=
        name != "OK" && name != "CANCELLED" && name != "DEADLINE_EXCEEDED" && name != "UNAVAILABLE";
  }
  std::printf(
      "\n| method | OK requests | p50 (s) | p95 (s) | p99 (s) |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [method, seconds] : latency) {
    std::printf("| %s | %zu | %.3f | %.3f | %.3f |\n", method.c_str(), seconds.size(),
                mulo::client::Percentile(seconds, 0.5), mulo::client::Percentile(seconds, 0.95),
                mulo::client::Percentile(seconds, 0.99));
  }
  std::printf("\n%s\n", unexpected ? "FAILED: statuses other than OK / CANCELLED / "
                                     "DEADLINE_EXCEEDED / UNAVAILABLE"
                                   : "statuses: only OK / CANCELLED / DEADLINE_EXCEEDED / "
                                     "UNAVAILABLE");
  return unexpected;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Server server;
  if (!server.Start()) {
    std::fprintf(stderr, "soak: mulo_server did not start\n");
    return 1;
  }
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  const v1::ListModelsResponse models = WaitForModels(*v1::ImageGeneration::NewStub(channel));
  if (models.models_size() == 0) {
    std::fprintf(stderr, "soak: the server lists no models\n");
    return 1;
  }
  const v1::ModelInfo& model = models.models(0);
  const std::vector<std::string> methods(model.methods().begin(), model.methods().end());

  const int total = absl::GetFlag(FLAGS_requests);
  const int warmup = static_cast<int>(total * absl::GetFlag(FLAGS_warmup_share));
  const int every = std::max(1, total / absl::GetFlag(FLAGS_samples));
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<std::pair<int, double>> rss;  // (requests done, MiB)
  double baseline = 0.0;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < absl::GetFlag(FLAGS_concurrency); ++c) {
    clients.emplace_back([&, c] {
      std::mt19937_64 rng(1000 + c);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      auto own_stub = v1::ImageGeneration::NewStub(channel);
      for (int i = next++; i < total; i = next++) {
        const std::string& method = methods[i % methods.size()];
        const double r = u(rng);
        const Ending ending = r < absl::GetFlag(FLAGS_cancel_share) ? Ending::kCancel
                              : r < absl::GetFlag(FLAGS_cancel_share) +
                                        absl::GetFlag(FLAGS_short_deadline_share)
                                  ? Ending::kShortDeadline
                                  : Ending::kNormal;
        Outcome outcome =
            Send(*own_stub, RequestFor(model.name(), method, i), method, ending, rng);
        std::lock_guard<std::mutex> lock(mu);
        outcomes.push_back(outcome);
        const int done = static_cast<int>(outcomes.size());
        if (done == warmup) baseline = server.RssMiB();
        if (done % every == 0 || done == total) {
          rss.emplace_back(done, server.RssMiB());
          std::fprintf(stderr, "\r[%d/%d requests] RSS %.1f MiB", done, total, rss.back().second);
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "\n");

  std::printf("soak: %d requests to %s (%zu methods, round robin), concurrency %d, server "
              "--workers=%d; %.0f%% cancelled by the client after 5-50 ms, %.0f%% with a "
              "5-50 ms deadline; %.0f s\n\n",
              total, model.name().c_str(), methods.size(), absl::GetFlag(FLAGS_concurrency),
              absl::GetFlag(FLAGS_workers), 100 * absl::GetFlag(FLAGS_cancel_share),
              100 * absl::GetFlag(FLAGS_short_deadline_share), wall);
  std::printf("| requests done | server RSS (MiB) |\n|---:|---:|\n");
  for (const auto& [done, mib] : rss) std::printf("| %d | %.1f |\n", done, mib);
  const double final_rss = rss.empty() ? 0.0 : rss.back().second;
  const double growth = baseline > 0 ? 100.0 * (final_rss - baseline) / baseline : 0.0;
  std::printf("\nRSS after warm-up (%d requests) %.1f MiB, at the end %.1f MiB: %+.2f%% "
              "(target under 2%%)\n\n",
              warmup, baseline, final_rss, growth);

  const bool unexpected = PrintOutcomes(outcomes);
  return unexpected || growth >= 2.0 ? 1 : 0;
}
