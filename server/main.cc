// mulo_server: keeps a model repository resident and serves mulo.v1.ImageGeneration over gRPC,
// with grpc.health.v1 (for "" and the service's name), server reflection (v1alpha, and v1
// answered by ReflectionV1Service) through GrpcFrontEnd, and Prometheus metrics on a separate
// HTTP port.
//
// Lifecycle: the ports open first with health NOT_SERVING and /readyz 503 while the models
// load; then SERVING. On SIGTERM or SIGINT: NOT_SERVING, new requests get UNAVAILABLE, queued
// and running requests finish within --drain_timeout (what is still running then ends
// UNAVAILABLE, retryable), then the process exits 0.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <torch/types.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/core/blas_kernels.h"
#include "engine/core/cpu_threads.h"
#include "engine/core/device_stream.h"
#include "engine/decode/baseline_method.h"
#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_pools.h"
#include "mulo/v1/method_names.h"
#include "server/api_keys.h"
#include "server/batch_policy.h"
#include "server/cuda_graph_policy.h"
#include "server/engine_status.h"
#include "server/generation_service.h"
#include "server/grpc_front_end.h"
#include "server/http/http_front_end.h"
#include "server/image_generation_service.h"
#include "server/kv_pool_sizing.h"
#include "server/model_repository.h"
#include "server/request_limits.h"
#include "server/request_log.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"
#include "server/text_file.h"

ABSL_FLAG(std::string, model_repository, "models",
          "directory whose subdirectories with a family.json are loaded and served");
ABSL_FLAG(bool, require_all_families, false,
          "exit when any family of --model_repository fails to load; by default the others "
          "are served, the failure is logged, and requests naming the broken family get "
          "UNAVAILABLE (HTTP 503) with the reason");
ABSL_FLAG(std::string, host, "0.0.0.0", "address the gRPC and metrics ports bind to");
ABSL_FLAG(int, port, 8001, "gRPC port (0 = pick a free one and print it)");
ABSL_FLAG(int, http_port, 8000,
          "HTTP port of the OpenAI-compatible Images API (/v1/images/generations, /v1/models); "
          "0 = pick a free one and print it, -1 = no HTTP API");
ABSL_FLAG(std::string, api_keys_file, "",
          "a file of API keys, one per line ('#' comments), reloaded on SIGHUP: HTTP calls to "
          "/v1/ need 'Authorization: Bearer <key>', gRPC mulo.v1 calls the same as "
          "'authorization' metadata; probes, metrics, health and reflection stay open");
ABSL_FLAG(absl::Duration, http_idle_timeout, absl::Seconds(30),
          "an HTTP connection that sends nothing for this long is closed (slow or idle "
          "clients); whole seconds, at least 1s");
ABSL_FLAG(absl::Duration, http_request_read_timeout, absl::Seconds(10),
          "an HTTP request (headers and body) must arrive whole within this from its "
          "connection's opening or its previous answer, however slowly its bytes drip; 0 = no "
          "limit");
ABSL_FLAG(int, http_max_connections, 4096,
          "HTTP connections open at once (they cost no thread: a few epoll threads serve "
          "them all); beyond, new connections are refused");
ABSL_FLAG(int, http_max_connections_per_client, 256,
          "HTTP connections one IP address may hold open (0 = no cap); behind a balancer every "
          "connection comes from the balancer: raise it or set 0 there");
ABSL_FLAG(int, http_threads, 4, "threads serving every HTTP connection (epoll)");
ABSL_FLAG(std::string, default_model, "",
          "the family of HTTP requests that name no model (OpenAI's SDKs may omit it); empty: "
          "the first loaded family in name order");
ABSL_FLAG(std::vector<std::string>, model_aliases, {},
          "other names for loaded families, comma-separated NAME=FAMILY pairs (e.g. "
          "dall-e-3=synth,gpt-image-1=synth), for clients that send a model name of their own");
ABSL_FLAG(absl::Duration, image_url_ttl, absl::Hours(1),
          "how long an image asked for with response_format url stays fetchable at "
          "/v1/images/files/...");
ABSL_FLAG(int, image_url_memory_mb, 256,
          "memory for images kept for response_format url; the oldest go first when full");
ABSL_FLAG(bool, image_url_needs_key, false,
          "with --api_keys_file: image URLs need a key too; by default a URL (128 random bits) "
          "works without one while the key that made it is valid, as OpenAI's signed URLs do");
ABSL_FLAG(std::string, http_public_url, "",
          "the base of image URLs (behind a proxy, e.g. https://images.example.com); empty: "
          "the scheme and the request's Host");
ABSL_FLAG(std::vector<std::string>, http_cors_origins, {},
          "origins whose browsers may call the HTTP API (CORS), comma-separated, or * for any; "
          "empty: no CORS headers and OPTIONS gets 405");
ABSL_FLAG(int, metrics_port, 8002, "HTTP port for /metrics, /healthz, /readyz (0 = free one)");
ABSL_FLAG(int, workers, 1, "requests decoded in parallel");
ABSL_FLAG(int, max_batch, 4,
          "requests each worker decodes together, their transformer forwards batched "
          "(continuous batching; tokens stay exactly those of a lone request); 1 turns it off");
ABSL_FLAG(int, max_batch_tokens, 256,
          "token rows (guidance streams x new positions) per batched forward; a larger single "
          "forward still runs, alone");
ABSL_FLAG(int64_t, kv_cache_memory, 0,
          "MiB of KV cache each worker allocates at load, as fixed slots shared by its "
          "requests (a request waits in the queue until its slots are free); 0: --max_batch "
          "requests' worth");
ABSL_FLAG(absl::Duration, batch_wait, absl::ZeroDuration(),
          "no longer used (accepted so that old command lines still start): each worker's "
          "engine loop runs a batch as soon as every request it steps waits for a forward");
ABSL_FLAG(std::string, default_method, mulo::engine::kBaselineMethod,
          "the method of requests that name none (any method of the API; `auto`: the fastest "
          "the family's calibration table allows)");
// Every method by default: with the engine loop no method loses in the batch beyond this CPU's
// noise (docs/benchmarks.md, "Which methods batch"), and on a GPU a batch reads the weights
// once for all its requests. A list keeps the others out (each then has its worker alone).
ABSL_FLAG(std::string, batch_methods, "all",
          "methods whose requests join the batch (all, none or a comma list of method names); "
          "a request of another method has its worker to itself");
ABSL_FLAG(std::string, batch_gemms, "per_sequence",
          "per_sequence: exact (a request's tokens never depend on its batch); shared: one GEMM "
          "for the whole batch, faster, equal up to float rounding");
ABSL_FLAG(int, max_queue, 16, "requests waiting beyond the running ones; more get UNAVAILABLE");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "on SIGTERM, how long queued and running requests may take to finish");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain; with --tls_key enables TLS on the gRPC and HTTP ports");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");
ABSL_FLAG(int, torch_threads, 1,
          "LibTorch intra-op threads per worker (1 is fastest for single-image decoding on CPU)");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(std::string, cuda_graphs, "auto",
          "on a CUDA device, replay a request's repeated transformer forward shapes as CUDA "
          "graphs (docs/gpu.md): auto (with up to 32 workers, each on a CUDA stream of its own), "
          "on (the same, refused beyond 32 workers), off (every forward eager)");
ABSL_FLAG(std::string, dtype, "float32",
          "compute dtype of the models' floating weights: float32, or bfloat16 (half the memory; "
          "on CPUs with bf16 instructions about 2x faster at full size, results differ from "
          "float32 by rounding)");
ABSL_FLAG(bool, fused_kernels, false,
          "run the decoder layers' decode steps through the fused kernels (engine/kernels: five "
          "launches per layer and attention's combine; built by tools/build_engine.sh with "
          "nvcc, elsewhere their LibTorch references run); off until a GPU run measures them "
          "(docs/gpu.md)");
ABSL_FLAG(int, max_message_mb, 64, "largest gRPC message accepted or sent, MiB");
ABSL_FLAG(int, max_tree_nodes, mulo::server::kDefaultMaxTreeNodes,
          "most draft-tree nodes a tree method may expand or verify per step, as its spec counts "
          "them from its options (docs/methods.md); larger trees are refused (0 = no bound)");
ABSL_FLAG(absl::Duration, max_decode_time, mulo::server::kDefaultMaxDecodeTime,
          "longest a request may decode, from when a worker starts it, whatever its deadline; "
          "longer ones end DEADLINE_EXCEEDED saying so (0 = no limit)");

namespace mulo::server {
namespace {

// Batched forwards reach the metrics through this relay: the scheduler (whose worker threads
// report them) outlives the metrics, so the metrics attach for their lifetime and a report
// in flight finishes before they detach.
class BatchMetricsRelay {
 public:
  class Attachment {
   public:
    Attachment(BatchMetricsRelay* relay, ServerMetrics* metrics) : relay_(relay) {
      absl::MutexLock lock(&relay_->mu_);
      relay_->metrics_ = metrics;
    }
    ~Attachment() {
      absl::MutexLock lock(&relay_->mu_);
      relay_->metrics_ = nullptr;
    }

   private:
    BatchMetricsRelay* relay_;
  };

  void Record(const engine::EngineLoop::BatchEvent& event) {
    absl::MutexLock lock(&mu_);
    if (metrics_ != nullptr)
      metrics_->RecordBatch(engine::EngineLoop::ComponentName(event.component), event.calls,
                            event.rows);
  }

 private:
  absl::Mutex mu_;
  ServerMetrics* metrics_ ABSL_GUARDED_BY(mu_) = nullptr;
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (cert.empty()) return grpc::InsecureServerCredentials();
  auto cert_pem = ReadTextFile(cert);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadTextFile(key);
  if (!key_pem.ok()) return key_pem.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key_pem, *cert_pem});
  return grpc::SslServerCredentials(options);
}

int Log(const std::string& message) {
  std::fprintf(stderr, "%s mulo_server: %s\n",
               absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               message.c_str());
  return 0;
}

// Every open connection is a descriptor: raise the soft limit to the hard one (commonly 1024
// to 1M), so that --http_max_connections is not cut short by the default 1024.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// Each worker's KV-cache pools for every loaded family (engine/decode/kv_pools.h), sized by
// --kv_cache_memory, handed to the scheduler and watched by the metrics.
absl::Status InstallKvPools(const ModelRepository& repository,
                            const Scheduler::Options& scheduler_options, Scheduler& scheduler,
                            ServerMetrics& metrics) {
  std::vector<engine::KvPools::Family> families;
  for (const std::string& name : repository.Names()) {
    // Each family's step graphs for the method options its requests take by default.
    engine::StatusOr<engine::KvPools::Family> family =
        engine::PoolFamily(name, repository.Find(name)->models());
    if (!family.ok()) return ToAbsl(family.status());
    families.push_back(std::move(*family));
  }
  const int64_t request_bytes = engine::KvPools::RequestBytes(families);
  const absl::StatusOr<int64_t> requests = KvPoolRequests(
      absl::GetFlag(FLAGS_kv_cache_memory), scheduler_options.max_batch, request_bytes);
  if (!requests.ok()) return requests.status();
  std::vector<std::unique_ptr<engine::KvPools>> pools;
  for (int worker = 0; worker < std::max(1, scheduler_options.workers); ++worker) {
    auto made = engine::KvPools::Make(families, *requests);
    if (!made.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("--kv_cache_memory: ", made.status().message()));
    }
    pools.push_back(std::move(*made));
  }
  std::vector<std::string> layout;
  for (const engine::KvPools::Usage& u : pools[0]->usage()) {
    layout.push_back(absl::StrCat(u.family, " ", u.component, " ", u.slots, "x", u.slot_rows,
                                  " rows"));
  }
  Log(absl::StrCat("KV-cache pools: ", *requests, " requests' worth per worker, ",
                   (pools[0]->MemoryBytes() + (1 << 20) - 1) >> 20, " MiB each (",
                   absl::StrJoin(layout, ", "), ")"));
  engine::PoolGraphs::Counts graphs;
  for (const auto& worker_pools : pools) graphs.Add(worker_pools->graph_counts());
  if (graphs.graphs + graphs.failed_captures > 0) {
    // Captured now, once: nothing is captured while serving (engine/model/pool_graphs.h).
    Log(absl::StrCat("CUDA graphs: ", graphs.graphs, " captured over the KV-cache pools of ",
                     pools.size(), " worker(s) in ",
                     absl::StrFormat("%.1f s, ", graphs.capture_seconds),
                     (graphs.memory_bytes + (1 << 20) - 1) >> 20, " MiB",
                     graphs.failed_captures > 0
                         ? absl::StrCat(" (", graphs.failed_captures,
                                        " failed: their batches run eagerly)")
                         : ""));
  }
  scheduler.SetKvPools(std::move(pools));
  metrics.WatchKvPools([&scheduler] {
    std::vector<ServerMetrics::KvPoolReading> readings;
    const std::vector<const engine::KvPools*> workers = scheduler.kv_pools();
    for (size_t w = 0; w < workers.size(); ++w) {
      for (const engine::KvPools::Usage& u : workers[w]->usage()) {
        readings.push_back({u.family, u.component, static_cast<int>(w), u.slots, u.used,
                            u.bytes, u.overflows});
      }
    }
    return readings;
  });
  return absl::OkStatus();
}

// The devices, graphs and dtype the flags ask for. INVALID_ARGUMENT naming the flag.
absl::StatusOr<engine::LoadOptions> LoadOptionsFromFlags() {
  engine::LoadOptions load_options;
  try {
    load_options.device = torch::Device(absl::GetFlag(FLAGS_device));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: ", absl::GetFlag(FLAGS_device), " is not a device"));
  }
  const absl::StatusOr<CudaGraphChoice> graphs =
      ChooseCudaGraphs(absl::GetFlag(FLAGS_cuda_graphs), load_options.device.is_cuda(),
                       absl::GetFlag(FLAGS_workers));
  if (!graphs.ok()) return graphs.status();
  load_options.cuda_graphs = graphs->enabled;
  if (!graphs->note.empty()) Log(graphs->note);
  load_options.fused_kernels = absl::GetFlag(FLAGS_fused_kernels);
  if (const std::string dtype = absl::GetFlag(FLAGS_dtype); dtype == "bfloat16") {
    load_options.dtype = torch::kBFloat16;
  } else if (dtype != "float32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: expected float32 or bfloat16, got \"", dtype, "\""));
  }
  return load_options;
}

// The workers, batches and queue the flags ask for (the callbacks are the caller's).
// INVALID_ARGUMENT naming the flag.
absl::StatusOr<Scheduler::Options> SchedulerOptionsFromFlags() {
  Scheduler::Options options;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.max_batch = absl::GetFlag(FLAGS_max_batch);
  options.batching.max_rows = absl::GetFlag(FLAGS_max_batch_tokens);
  options.max_queue = absl::GetFlag(FLAGS_max_queue);
  if (const std::string gemms = absl::GetFlag(FLAGS_batch_gemms); gemms == "shared") {
    options.batching.gemms = engine::PackedGemms::kShared;
  } else if (gemms != "per_sequence") {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_gemms: expected per_sequence or shared, got \"", gemms, "\""));
  }
  if (options.max_batch < 1 || options.max_batch > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_batch: expected 1..64, got ", options.max_batch));
  }
  if (options.batching.max_rows < 1) {
    return absl::InvalidArgumentError("--max_batch_tokens: must be >= 1");
  }
  // Checked again against the families' sizes once they load (InstallKvPools).
  if (auto requests = KvPoolRequests(absl::GetFlag(FLAGS_kv_cache_memory), 1, 0); !requests.ok()) {
    return requests.status();
  }
  if (absl::GetFlag(FLAGS_batch_wait) != absl::ZeroDuration()) {
    Log("--batch_wait: no longer used, ignored (the engine loop batches when every request "
        "waits for a forward)");
  }
  return options;
}

// --max_decode_time and --max_tree_nodes. INVALID_ARGUMENT naming the flag.
absl::StatusOr<RequestLimits> LimitsFromFlags() {
  RequestLimits limits;
  const absl::Duration max_decode = absl::GetFlag(FLAGS_max_decode_time);
  if (max_decode < absl::ZeroDuration() || max_decode > absl::Hours(24 * 7)) {
    return absl::InvalidArgumentError("--max_decode_time: expected 0 (no limit) up to 168h");
  }
  limits.max_decode_time =
      max_decode == absl::ZeroDuration() ? absl::InfiniteDuration() : max_decode;
  limits.max_tree_nodes = absl::GetFlag(FLAGS_max_tree_nodes);  // 0 = no bound
  if (limits.max_tree_nodes < 0) {
    return absl::InvalidArgumentError("--max_tree_nodes: must be >= 0 (0 = no bound)");
  }
  return limits;
}

// --api_keys_file's keys, or none required without it.
absl::StatusOr<std::unique_ptr<ApiKeys>> ApiKeysFromFlags() {
  const std::string keys_file = absl::GetFlag(FLAGS_api_keys_file);
  if (keys_file.empty()) return std::make_unique<ApiKeys>();
  auto loaded = ApiKeys::Load(keys_file);
  if (loaded.ok()) Log("API keys: required (--api_keys_file; SIGHUP reloads it)");
  return loaded;
}

// The gRPC front end's address, credentials and limits; requests whose bytes do not parse are
// logged and counted in `metrics`.
absl::StatusOr<GrpcFrontEndOptions> GrpcOptionsFromFlags(ServerMetrics& metrics) {
  auto credentials = Credentials();
  if (!credentials.ok()) return credentials.status();
  GrpcFrontEndOptions grpc_options;
  grpc_options.address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  grpc_options.credentials = *credentials;
  grpc_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_mb) * 1024 * 1024;
  // Requests whose bytes do not parse end INVALID_ARGUMENT with a message, and are counted.
  grpc_options.on_unparsable = [&metrics](const std::string& method, const grpc::Status& status) {
    RequestLogLine line;
    line.request_id = "-";
    line.protocol = "grpc";
    line.status = absl::InvalidArgumentError(status.error_message());
    WriteRequestLog(line);
    if (absl::EndsWith(method, "/Generate")) metrics.RecordRequest(line);
  };
  return grpc_options;
}

// The HTTP front end's options on `http_port`.
http::HttpFrontEndOptions HttpOptionsFromFlags(int http_port, const ApiKeys* api_keys) {
  http::HttpFrontEndOptions http_options;
  http_options.address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", http_port);
  http_options.api_keys = api_keys;
  if (const std::string cert = absl::GetFlag(FLAGS_tls_cert); !cert.empty()) {
    // Read again here: Credentials() checked both files already.
    http_options.tls_cert_pem = ReadTextFile(cert).value_or("");
    http_options.tls_key_pem = ReadTextFile(absl::GetFlag(FLAGS_tls_key)).value_or("");
  }
  http_options.idle_timeout_seconds = static_cast<unsigned>(
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_http_idle_timeout))));
  http_options.max_connections =
      static_cast<unsigned>(std::max(1, absl::GetFlag(FLAGS_http_max_connections)));
  http_options.max_connections_per_client =
      static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_http_max_connections_per_client)));
  http_options.threads = static_cast<unsigned>(std::max(1, absl::GetFlag(FLAGS_http_threads)));
  http_options.request_read_timeout_seconds = static_cast<unsigned>(std::max<int64_t>(
      0, absl::ToInt64Seconds(absl::GetFlag(FLAGS_http_request_read_timeout))));
  http_options.cors_origins = absl::GetFlag(FLAGS_http_cors_origins);
  http_options.image_url_ttl = std::chrono::seconds(
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_image_url_ttl))));
  http_options.image_url_max_bytes =
      static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_image_url_memory_mb))) << 20;
  http_options.public_url = absl::GetFlag(FLAGS_http_public_url);
  http_options.image_url_needs_key = absl::GetFlag(FLAGS_image_url_needs_key);
  return http_options;
}

// What loaded, in the log and the metrics, and --model_aliases / --default_model over the
// loaded families. INVALID_ARGUMENT naming the flag.
absl::Status ApplyRepository(const ModelRepository& repository, const torch::Device& device,
                             ServerMetrics& metrics, GenerationService& generation) {
  for (const auto& dir : repository.skipped()) {
    Log(absl::StrCat("skipped ", dir, ": no family.json (not a family, or a conversion that did "
                     "not finish)"));
  }
  for (const auto& [name, why] : repository.failed()) {
    metrics.SetModelLoaded(name, false);
    Log(absl::StrCat("family ", name, " not loaded (requests for it get UNAVAILABLE; "
                     "--require_all_families makes this fatal): ", why));
  }
  for (const auto& name : repository.Names()) {
    metrics.SetModelLoaded(name, true);
    metrics.SetModelWeightBytes(name, device.str(), repository.Find(name)->models().weight_bytes);
  }
  const std::string loaded = absl::StrJoin(repository.Names(), ", ");
  std::map<std::string, std::string> aliases;
  for (const std::string& pair : absl::GetFlag(FLAGS_model_aliases)) {
    const size_t equals = pair.find('=');
    const std::string family = equals == std::string::npos ? "" : pair.substr(equals + 1);
    if (equals == 0 || family.empty() || repository.Find(family) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model_aliases: \"", pair,
                       "\" is not NAME=FAMILY with a loaded family (loaded: ", loaded, ")"));
    }
    aliases[pair.substr(0, equals)] = family;
  }
  generation.SetModelAliases(std::move(aliases));
  if (const std::string model = absl::GetFlag(FLAGS_default_model); !model.empty()) {
    if (repository.Find(model) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--default_model: ", model, " is not a loaded family (loaded: ", loaded, ")"));
    }
    generation.SetDefaultModel(model);
  }
  return absl::OkStatus();
}

// Waits for SIGTERM or SIGINT (returned), reloading the API keys on every SIGHUP.
int WaitForStop(const sigset_t& signals, ApiKeys& api_keys) {
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (!api_keys.enabled()) {
      Log("SIGHUP: no --api_keys_file to reload");
      continue;
    }
    // The count only: keys never reach the log.
    auto reloaded = api_keys.Reload();
    Log(!reloaded.ok()   ? absl::StrCat("SIGHUP: ", reloaded.status().message(),
                                       "; the keys in force stay")
        : *reloaded == 0 ? std::string("SIGHUP: the keys file holds no key: every key is "
                                       "revoked, every API call is refused until keys are added")
                         : absl::StrCat("SIGHUP: reloaded ", *reloaded, " API keys"));
  }
  return signal;
}

// --batch_methods, logged with the batch size.
absl::StatusOr<BatchPolicy> BatchPolicyFromFlags(int max_batch) {
  auto batch_policy = BatchPolicy::Parse(absl::GetFlag(FLAGS_batch_methods));
  if (!batch_policy.ok()) return batch_policy.status();
  Log(max_batch == 1 ? std::string("batching: off (--max_batch=1)")
                     : absl::StrCat("batching: up to ", max_batch,
                                    " requests per worker, methods ", batch_policy->ToString()));
  return batch_policy;
}

// The HTTP front end on --http_port (null when it is negative), after which the line tests
// and scripts wait for says its port.
absl::StatusOr<std::unique_ptr<http::HttpFrontEnd>> StartHttpFrontEnd(
    const ApiKeys* api_keys, GenerationService& generation) {
  const int http_port = absl::GetFlag(FLAGS_http_port);
  if (http_port < 0) return std::unique_ptr<http::HttpFrontEnd>();
  auto started = http::HttpFrontEnd::Start(HttpOptionsFromFlags(http_port, api_keys), &generation);
  if (!started.ok()) return started.status();
  // Before the "listening" line, which tests and scripts wait for.
  std::printf("mulo_server HTTP API on port %d\n", (*started)->port());
  return started;
}

// Stops taking requests, lets the running ones finish within --drain_timeout (then cancels
// them) and shuts the front ends down.
void Drain(GrpcFrontEnd& front_end, http::HttpFrontEnd* http_front_end,
           GenerationService& generation, Scheduler& scheduler) {
  front_end.StopServing();
  generation.StopAccepting();
  scheduler.StopAccepting();
  const bool drained = scheduler.WaitIdle(absl::GetFlag(FLAGS_drain_timeout));
  if (!drained) {
    Log("drain timeout: cancelling what is still running");
    generation.CancelAll();
    scheduler.WaitIdle(absl::Seconds(5));
  }
  // Handlers of finished jobs return promptly; give in-flight RPCs a moment to flush.
  front_end.Shutdown(absl::Seconds(drained ? 5 : 1));
  if (http_front_end != nullptr) http_front_end->Shutdown(absl::Seconds(drained ? 5 : 1));
  Log("stopped");
}

// Every flag the server reads before it starts, checked.
struct ServerFlags {
  engine::LoadOptions load;
  Scheduler::Options scheduler;
  std::string default_method;
  BatchPolicy batch_policy;
  RequestLimits limits;
  std::unique_ptr<ApiKeys> api_keys;
};

// The flags read and checked. INVALID_ARGUMENT naming the first bad one.
absl::StatusOr<ServerFlags> ParseServerFlags() {
  absl::StatusOr<engine::LoadOptions> load = LoadOptionsFromFlags();
  if (!load.ok()) return load.status();
  absl::StatusOr<Scheduler::Options> scheduler = SchedulerOptionsFromFlags();
  if (!scheduler.ok()) return scheduler.status();
  const std::string default_method = absl::GetFlag(FLAGS_default_method);
  if (v1::ApiMethodField(default_method) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--default_method: unknown method \"", default_method, "\" (",
                     absl::StrJoin(v1::ApiMethodNames(), ", "), ")"));
  }
  absl::StatusOr<BatchPolicy> batch_policy = BatchPolicyFromFlags(scheduler->max_batch);
  if (!batch_policy.ok()) return batch_policy.status();
  absl::StatusOr<RequestLimits> limits = LimitsFromFlags();
  if (!limits.ok()) return limits.status();
  absl::StatusOr<std::unique_ptr<ApiKeys>> api_keys = ApiKeysFromFlags();
  if (!api_keys.ok()) return api_keys.status();
  return ServerFlags{*std::move(load),         *std::move(scheduler), default_method,
                     *std::move(batch_policy), *limits,               *std::move(api_keys)};
}

// A flag's error: logged, and the exit status of a bad command line.
int BadFlag(const absl::Status& status) {
  Log(std::string(status.message()));
  return 2;
}

// Signals are taken by one thread with sigwait; every other thread (gRPC, workers, HTTP)
// inherits this mask and never sees them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reloads --api_keys_file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Loads --model_repository and sets the flags and pools that depend on its families: 0, or
// the exit status after logging why (1: the families did not load, 2: a flag names a family
// that did not or asks for pools that do not fit).
int LoadModels(const ServerFlags& flags, ServerMetrics& metrics, GenerationService& generation,
               Scheduler& scheduler, std::unique_ptr<ModelRepository>& repository) {
  Log(absl::StrCat("loading models from ", absl::GetFlag(FLAGS_model_repository)));
  auto loaded = ModelRepository::Load(absl::GetFlag(FLAGS_model_repository), flags.load,
                                      absl::GetFlag(FLAGS_require_all_families));
  if (!loaded.ok()) {
    Log(absl::StrCat("cannot load models: ", loaded.status().ToString()));
    return 1;
  }
  repository = *std::move(loaded);
  if (absl::Status applied = ApplyRepository(*repository, flags.load.device, metrics, generation);
      !applied.ok()) {
    return BadFlag(applied);
  }
  if (absl::Status pools = InstallKvPools(*repository, flags.scheduler, scheduler, metrics);
      !pools.ok()) {
    return BadFlag(pools);
  }
  return 0;
}

int Run() {
  RaiseOpenFileLimit();
  const sigset_t signals = BlockStopSignals();

  const int torch_threads = absl::GetFlag(FLAGS_torch_threads);  // SetCpuThreads clamps to >= 1
  engine::SetCpuThreads(torch_threads);
  if (const std::string advice = engine::BlasKernelAdvice(); !advice.empty()) Log(advice);
  absl::StatusOr<ServerFlags> flags = ParseServerFlags();
  if (!flags.ok()) return BadFlag(flags.status());

  // Declared in this order so they are destroyed in reverse: the service, then the metrics
  // (their HTTP server reads the scheduler at scrape time), then the scheduler.
  BatchMetricsRelay batch_metrics;
  Scheduler::Options& scheduler_options = flags->scheduler;
  scheduler_options.on_batch = [&batch_metrics](const engine::EngineLoop::BatchEvent& e) {
    batch_metrics.Record(e);
  };
  // Per worker: the OpenMP thread count is per thread, and a new thread gets OpenMP's default
  // (every core), not --torch_threads. On a GPU each worker launches on a stream of its own
  // (engine/core/device_stream.h).
  scheduler_options.on_worker_start = [torch_threads, device = flags->load.device] {
    engine::SetCpuThreads(torch_threads);
    engine::UseOwnDeviceStream(device);
  };
  Scheduler scheduler(scheduler_options);
  ServerMetrics metrics;
  BatchMetricsRelay::Attachment batch_metrics_attached(&batch_metrics, &metrics);
  metrics.WatchQueue(
      [&scheduler] { return std::make_pair(scheduler.queue_depth(), scheduler.running()); });
  GenerationService generation(scheduler, metrics, std::move(flags->batch_policy),
                               flags->limits);
  generation.SetDefaultMethod(flags->default_method);
  ApiKeys& api_keys = *flags->api_keys;
  ImageGenerationService service(generation, &api_keys);
  std::atomic<bool> ready{false};

  auto http = metrics.StartHttp(absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_metrics_port),
                                [&ready] { return ready.load(); });
  if (!http.ok()) {
    Log(absl::StrCat("metrics: ", http.status().ToString()));
    return 1;
  }
  auto grpc_options = GrpcOptionsFromFlags(metrics);
  if (!grpc_options.ok()) {
    Log(grpc_options.status().ToString());
    return 2;
  }
  auto grpc_front_end = GrpcFrontEnd::Start(*grpc_options, &service);
  if (!grpc_front_end.ok()) {
    Log(std::string(grpc_front_end.status().message()));
    return 1;
  }
  GrpcFrontEnd& front_end = **grpc_front_end;
  auto http_front_end = StartHttpFrontEnd(&api_keys, generation);
  if (!http_front_end.ok()) {
    Log(std::string(http_front_end.status().message()));
    return 1;
  }
  // The exact line tests and scripts wait for.
  std::printf("mulo_server listening on port %d (metrics on port %d)\n", front_end.port(), *http);
  std::fflush(stdout);

  const auto load_start = absl::Now();
  std::unique_ptr<ModelRepository> repository;
  if (int status = LoadModels(*flags, metrics, generation, scheduler, repository); status != 0) {
    return status;
  }
  generation.SetRepository(repository.get());
  front_end.SetServing(true);
  ready = true;
  Log(absl::StrCat("serving ", absl::StrJoin(repository->Names(), ", "), " (loaded in ",
                   absl::FormatDuration(absl::Now() - load_start), ")"));

  const int signal = WaitForStop(signals, api_keys);
  Log(absl::StrCat("received ", signal == SIGTERM ? "SIGTERM" : "SIGINT", ", draining"));
  ready = false;
  Drain(front_end, http_front_end->get(), generation, scheduler);
  return 0;
}

}  // namespace
}  // namespace mulo::server

namespace {

// An exception that escapes a thread ends the process; this says which one before it does, so
// the log of a crashed server names the cause (the default handler may print nothing when two
// threads die at once).
[[noreturn]] void LogUncaughtException() {
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mulo_server: terminating on an uncaught exception: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "mulo_server: terminating on an uncaught exception of unknown type\n");
    }
  }
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(&LogUncaughtException);
  // --help lists this program's own flags (defined under server/), not every library's.
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "server/");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "mulo_server --model_repository=models --port=8001 --metrics_port=8002");
  absl::ParseCommandLine(argc, argv);
  return mulo::server::Run();
}
