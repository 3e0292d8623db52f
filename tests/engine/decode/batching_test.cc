// Continuous batching is exact: a forward inside a batch returns, bit for bit, what it returns
// alone (Transformer::ForwardBatch), and every method decodes the same tokens inside batches of
// other requests, methods and lengths as it does alone (ForwardBatcher), on the CPU in float32.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/decode/forward_batcher.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

const ModelSet& Family() {
  static const ModelSet* family = [] {
    SetCpuThreads(1);
    auto loaded = LoadModelSet("models/synth", LoadOptions());
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return new ModelSet(*std::move(loaded));
  }();
  return *family;
}

std::vector<std::string> Prompts(int count) {
  std::ifstream in("models/synth/heldout_prompts.jsonl");
  std::vector<std::string> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < count && std::getline(in, line)) {
    prompts.push_back(nlohmann::json::parse(line)["prompt"].get<std::string>());
  }
  return prompts;
}

// A cache holding the condition of `seed`'s random features and `tokens` fed raster tokens.
KvCache FilledCache(const Transformer& model, int64_t batch, int64_t tokens, int64_t seed) {
  torch::manual_seed(seed);
  KvCache cache = model.NewCache(batch, 16);  // small: the forwards below make it grow
  auto condition = torch::randn({batch, model.config().cls_token_num, model.config().dim});
  EXPECT_TRUE(model.Prefill(cache, condition, LogitsMode::kNone).ok());
  if (tokens > 0) {
    auto ids = torch::randint(model.config().vocab_size, {1, tokens}, torch::kInt64)
                   .expand({batch, tokens})
                   .contiguous();
    auto positions = torch::arange(model.TokenPosition(0), model.TokenPosition(tokens));
    EXPECT_TRUE(model.ForwardTokens(cache, ids, positions, LogitsMode::kNone).ok());
  }
  return cache;
}

struct CallSpec {
  int64_t batch, cached_tokens, new_tokens;
  LogitsMode mode;
  bool tree_mask;  // a custom mask (every new row sees the cache and itself only)
};

ForwardCall MakeCall(const Transformer& model, KvCache& cache, const CallSpec& spec,
                     int64_t seed) {
  torch::manual_seed(seed);
  ForwardCall call;
  call.cache = &cache;
  call.embeddings = torch::randn({spec.batch, spec.new_tokens, model.config().dim});
  call.positions = torch::arange(model.TokenPosition(spec.cached_tokens),
                                 model.TokenPosition(spec.cached_tokens + spec.new_tokens));
  if (spec.tree_mask) {
    const int64_t n = spec.new_tokens;
    call.mask = torch::ones({n, cache.length() + n}, torch::kBool);
    call.mask.narrow(1, cache.length(), n).copy_(torch::eye(n, torch::kBool));
  }
  call.logits_mode = spec.mode;
  return call;
}

TEST(ForwardBatchTest, EachCallEqualsItsLoneForwardBitForBit) {
  const Transformer& model = *Family().target;
  const std::vector<CallSpec> specs = {
      {2, 0, 1, LogitsMode::kLast, false},  {2, 7, 1, LogitsMode::kLast, false},
      {1, 3, 5, LogitsMode::kAll, false},   {2, 12, 4, LogitsMode::kAll, true},
      {2, 30, 9, LogitsMode::kAll, false},  {1, 1, 2, LogitsMode::kNone, false},
      {2, 20, 6, LogitsMode::kLast, false},
  };
  std::vector<KvCache> alone, batched;
  std::vector<ForwardCall> calls;
  for (size_t i = 0; i < specs.size(); ++i) {
    alone.push_back(FilledCache(model, specs[i].batch, specs[i].cached_tokens, 100 + i));
    batched.push_back(FilledCache(model, specs[i].batch, specs[i].cached_tokens, 100 + i));
  }
  for (size_t i = 0; i < specs.size(); ++i) calls.push_back(MakeCall(model, batched[i], specs[i], i));
  auto outputs = model.ForwardBatch(calls, PackedGemms::kPerSequence);
  ASSERT_OK(outputs);
  std::vector<KvCache> shared;
  std::vector<ForwardCall> shared_calls;
  for (size_t i = 0; i < specs.size(); ++i) {
    shared.push_back(FilledCache(model, specs[i].batch, specs[i].cached_tokens, 100 + i));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    shared_calls.push_back(MakeCall(model, shared[i], specs[i], i));
  }
  auto shared_outputs = model.ForwardBatch(shared_calls, PackedGemms::kShared);
  ASSERT_OK(shared_outputs);
  ASSERT_EQ(outputs->size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ForwardCall call = MakeCall(model, alone[i], specs[i], i);
    auto expected =
        model.Forward(alone[i], call.embeddings, call.positions, call.mask, call.logits_mode);
    ASSERT_OK(expected);
    const ForwardOutput& got = (*outputs)[i];
    EXPECT_TRUE(got.hidden.equal(expected->hidden)) << "call " << i;
    ASSERT_EQ(got.logits.defined(), expected->logits.defined()) << "call " << i;
    if (expected->logits.defined()) {
      EXPECT_EQ(got.logits.sizes(), expected->logits.sizes()) << "call " << i;
      EXPECT_TRUE(got.logits.equal(expected->logits)) << "call " << i << " differs by "
                                                      << testing::MaxAbsDiff(got.logits,
                                                                             expected->logits);
    }
    EXPECT_EQ(batched[i].length(), alone[i].length()) << "call " << i;
    // Shared GEMMs: the same forward up to the last bits of float32.
    if (expected->logits.defined()) {
      EXPECT_LT(testing::MaxAbsDiff((*shared_outputs)[i].logits, expected->logits), 1e-3)
          << "call " << i;
    }
    for (int64_t layer : {int64_t{0}, model.config().n_layer - 1}) {
      EXPECT_TRUE(batched[i].Keys(layer).equal(alone[i].Keys(layer))) << "call " << i;
      EXPECT_TRUE(batched[i].Values(layer).equal(alone[i].Values(layer))) << "call " << i;
    }
  }
}

TEST(ForwardBatchTest, ABadCallFailsTheBatchBeforeAnyCacheMoves) {
  const Transformer& model = *Family().target;
  KvCache a = FilledCache(model, 2, 3, 1), b = FilledCache(model, 2, 4, 2);
  ForwardCall good = MakeCall(model, a, {2, 3, 2, LogitsMode::kAll, false}, 3);
  ForwardCall bad = MakeCall(model, b, {2, 4, 2, LogitsMode::kAll, false}, 4);
  bad.positions = torch::tensor({int64_t{0}, int64_t{1} << 20});
  auto outputs = model.ForwardBatch({good, bad}, PackedGemms::kPerSequence);
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(outputs.status().message().find("positions"), std::string::npos);
  EXPECT_EQ(a.length(), good.cache->length());
  EXPECT_EQ(a.length(), model.config().cls_token_num + 3);

  auto shared = model.ForwardBatch({good, good}, PackedGemms::kPerSequence);
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shared.status().message().find("share a cache"), std::string::npos);
}

struct Job {
  std::string method;
  int prompt;
  double temperature;
};

StatusOr<DecodeResult> DecodeJob(const Job& job, ForwardBatcher* batcher,
                                 const CancelToken& cancel, ProgressSink& sink) {
  const ModelSet& family = Family();
  static const std::vector<std::string> prompts = Prompts(8);
  MULO_ASSIGN_OR_RETURN(MethodConfig config, DefaultMethodConfig(job.method, family));
  MULO_ASSIGN_OR_RETURN(auto method, MakeMethod(config, family));
  MULO_ASSIGN_OR_RETURN(Condition condition, ConditionFromPrompt(family, prompts[job.prompt]));
  DecodeRequest request;
  request.condition = condition;
  request.sampling.cfg_scale = family.default_cfg_scale;
  request.sampling.temperature = job.temperature;
  request.sampling.seed = 1000 + job.prompt;
  request.batcher = batcher;
  return method->Decode(request, family, sink, cancel);
}

std::vector<Job> EveryMethodTwice() {
  std::vector<Job> jobs;
  int prompt = 0;
  for (const std::string& method : AvailableMethods(Family())) {
    for (double temperature : {0.0, 1.0}) jobs.push_back({method, prompt++ % 8, temperature});
  }
  return jobs;
}

// The jobs run `concurrency` at a time on their own threads, sharing one batcher: a finished
// job's thread takes the next, so requests join and leave running batches.
std::vector<StatusOr<DecodeResult>> DecodeTogether(const std::vector<Job>& jobs,
                                                   int concurrency, ForwardBatcher& batcher) {
  std::vector<StatusOr<DecodeResult>> results(jobs.size(), InternalError("not run"));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      SetCpuThreads(1);
      NullProgressSink sink;
      CancelToken cancel;
      for (size_t i = next++; i < jobs.size(); i = next++) {
        results[i] = DecodeJob(jobs[i], &batcher, cancel, sink);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

// Each job's tokens decoded alone, without a batcher.
void DecodeAlone(const std::vector<Job>& jobs, std::vector<std::vector<int32_t>>* tokens) {
  for (const Job& job : jobs) {
    NullProgressSink sink;
    CancelToken cancel;
    auto result = DecodeJob(job, nullptr, cancel, sink);
    ASSERT_OK(result);
    tokens->push_back(result->tokens);
  }
}

TEST(ForwardBatcherTest, EveryMethodDecodesItsLoneTokensInsideMixedBatches) {
  const std::vector<Job> jobs = EveryMethodTwice();
  ASSERT_GE(AvailableMethods(Family()).size(), 10u);
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  ForwardBatcher batcher(
      {/*max_rows=*/256, std::chrono::milliseconds(50), PackedGemms::kPerSequence});
  auto together = DecodeTogether(jobs, 6, batcher);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i])
        << jobs[i].method << " at temperature " << jobs[i].temperature;
  }
  // The batches really mixed requests: most forwards carried several.
  const ForwardBatcher::Counters counters = batcher.counters();
  EXPECT_GE(counters.max_calls, 4);
  EXPECT_GT(counters.calls, 2 * counters.forwards) << counters.calls << " calls in "
                                                   << counters.forwards << " forwards";
}

// A sink that cancels its request once `rows` rows have streamed.
class CancelAfterRows : public ProgressSink {
 public:
  CancelAfterRows(CancelToken* cancel, int64_t rows) : cancel_(cancel), rows_(rows) {}
  void OnRows(int64_t first_row, int64_t num_rows, const std::vector<int32_t>&) override {
    if (first_row + num_rows >= rows_) cancel_->Cancel();
  }

 private:
  CancelToken* cancel_;
  int64_t rows_;
};

TEST(ForwardBatcherTest, ACancelledRequestLeavesAndTheOthersFinishExactly) {
  const std::vector<Job> jobs = {{"ar", 0, 1.0}, {"mulo", 1, 1.0}, {"ar", 2, 0.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  // A short max_wait would hide a seat that is never given back; 10 s would time the test out.
  ForwardBatcher batcher({256, std::chrono::seconds(10), PackedGemms::kPerSequence});
  std::vector<StatusOr<DecodeResult>> results(jobs.size() + 1, InternalError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      SetCpuThreads(1);
      NullProgressSink sink;
      CancelToken cancel;
      results[i] = DecodeJob(jobs[i], &batcher, cancel, sink);
    });
  }
  threads.emplace_back([&] {
    SetCpuThreads(1);
    CancelToken cancel;
    CancelAfterRows sink(&cancel, 2);
    results.back() = DecodeJob({"speculative", 3, 1.0}, &batcher, cancel, sink);
  });
  const auto start = std::chrono::steady_clock::now();
  for (auto& thread : threads) thread.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(results.back().ok());
  EXPECT_EQ(results.back().status().code(), StatusCode::kCancelled);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << jobs[i].method;
  }
}

}  // namespace
}  // namespace mulo::engine
