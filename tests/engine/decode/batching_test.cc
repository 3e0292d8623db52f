// Continuous batching is exact: a forward inside a batch returns, bit for bit, what it returns
// alone (Transformer::ForwardBatch), and every method decodes the same tokens inside batches of
// other requests, methods and lengths as it does alone (EngineLoop), on the CPU in float32.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/cpu_threads.h"
#include "engine/core/host_read.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "engine/model/model_set.h"
#include "tests/engine/decode/synth_jobs.h"
#include "tests/engine/test_util.h"

namespace mulo::engine {
namespace {

using testing::DecodeSynthJob;
using testing::SynthJob;

const ModelSet& Family() { return testing::SynthFamily(); }

// A cache holding the condition of `seed`'s random features and `tokens` fed raster tokens.
KvCache FilledCache(const TokenModel& model, int64_t batch, int64_t tokens, int64_t seed) {
  at::manual_seed(seed);
  KvCache cache = model.NewCache(batch, 16);  // small: the forwards below make it grow
  auto condition = torch::randn({batch, model.condition_shape().rows, model.dim()});
  EXPECT_TRUE(model.Prefill(cache, condition, LogitsMode::kNone).ok());
  if (tokens > 0) {
    auto ids = torch::randint(model.vocab_size(), {1, tokens}, torch::kInt64)
                   .expand({batch, tokens})
                   .contiguous();
    auto positions = torch::arange(model.TokenPosition(model.condition_shape().rows, 0),
                                   model.TokenPosition(model.condition_shape().rows, tokens));
    EXPECT_TRUE(model.ForwardTokens(cache, ids, positions, LogitsMode::kNone).ok());
  }
  return cache;
}

struct CallSpec {
  int64_t batch, cached_tokens, new_tokens;
  LogitsMode mode;
  bool tree_mask;  // a custom mask (every new row sees the cache and itself only)
};

ForwardCall MakeCall(const TokenModel& model, KvCache& cache, const CallSpec& spec, int64_t seed) {
  at::manual_seed(seed);
  ForwardCall call;
  call.cache = &cache;
  call.embeddings = torch::randn({spec.batch, spec.new_tokens, model.dim()});
  call.positions = torch::arange(
      model.TokenPosition(model.condition_shape().rows, spec.cached_tokens),
      model.TokenPosition(model.condition_shape().rows, spec.cached_tokens + spec.new_tokens));
  if (spec.tree_mask) {
    const int64_t n = spec.new_tokens;
    call.mask = torch::ones({n, cache.length() + n}, torch::kBool);
    call.mask.narrow(1, cache.length(), n).copy_(torch::eye(n, torch::kBool));
  }
  call.logits_mode = spec.mode;
  return call;
}

TEST(ForwardBatchTest, EachCallEqualsItsLoneForwardBitForBit) {
  const TokenModel& model = *Family().target;
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
  for (size_t i = 0; i < specs.size(); ++i)
    calls.push_back(MakeCall(model, batched[i], specs[i], i));
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
      EXPECT_TRUE(got.logits.equal(expected->logits))
          << "call " << i << " differs by " << testing::MaxAbsDiff(got.logits, expected->logits);
    }
    EXPECT_EQ(batched[i].length(), alone[i].length()) << "call " << i;
    // Shared GEMMs: the same forward up to the last bits of float32.
    if (expected->logits.defined()) {
      EXPECT_LT(testing::MaxAbsDiff((*shared_outputs)[i].logits, expected->logits), 1e-3)
          << "call " << i;
    }
    for (int64_t layer : {int64_t{0}, alone[i].num_layers() - 1}) {
      EXPECT_TRUE(batched[i].Keys(layer).equal(alone[i].Keys(layer))) << "call " << i;
      EXPECT_TRUE(batched[i].Values(layer).equal(alone[i].Values(layer))) << "call " << i;
    }
  }
}

TEST(ForwardBatchTest, ABadCallFailsTheBatchBeforeAnyCacheMoves) {
  const TokenModel& model = *Family().target;
  KvCache a = FilledCache(model, 2, 3, 1), b = FilledCache(model, 2, 4, 2);
  ForwardCall good = MakeCall(model, a, {2, 3, 2, LogitsMode::kAll, false}, 3);
  ForwardCall bad = MakeCall(model, b, {2, 4, 2, LogitsMode::kAll, false}, 4);
  bad.positions = torch::tensor({int64_t{0}, int64_t{1} << 20});
  auto outputs = model.ForwardBatch({good, bad}, PackedGemms::kPerSequence);
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(outputs.status().message().find("positions"), std::string::npos);
  EXPECT_EQ(a.length(), good.cache->length());
  EXPECT_EQ(a.length(), model.condition_shape().rows + 3);

  auto shared = model.ForwardBatch({good, good}, PackedGemms::kPerSequence);
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shared.status().message().find("share a cache"), std::string::npos);
}

// A head cache holding `committed` pairs of `seed`'s random inputs.
KvCache FilledHeadCache(const EagleHead& head, int64_t batch, int64_t committed, int64_t seed) {
  at::manual_seed(seed);
  KvCache cache = head.NewCache(batch, 4);  // small: the forwards below make it grow
  if (committed > 0) {
    const int64_t dim = Family().target->dim();
    EXPECT_TRUE(head.Forward(cache, torch::randn({batch, committed, dim}),
                             torch::randn({batch, committed, dim}), torch::Tensor())
                    .ok());
  }
  return cache;
}

struct HeadSpec {
  int64_t batch, committed, new_rows;
  bool tree_mask;  // every new row sees the committed rows and itself only
};

HeadCall MakeHeadCall(KvCache& cache, const HeadSpec& spec, int64_t seed) {
  at::manual_seed(seed);
  const int64_t dim = Family().target->dim(), n = spec.new_rows;
  HeadCall call{&cache, torch::randn({spec.batch, n, dim}), torch::randn({spec.batch, n, dim}),
                torch::Tensor()};
  if (spec.tree_mask) {
    call.mask = torch::ones({n, cache.length() + n}, torch::kBool);
    call.mask.narrow(1, cache.length(), n).copy_(torch::eye(n, torch::kBool));
  }
  return call;
}

TEST(ForwardBatchTest, EachHeadCallEqualsItsLoneForwardBitForBit) {
  const EagleHead& head = *Family().eagle;
  const std::vector<HeadSpec> specs = {
      {2, 1, 1, false}, {2, 5, 3, true}, {1, 9, 1, false}, {2, 12, 6, false}, {2, 3, 4, true},
  };
  for (PackedGemms gemms : {PackedGemms::kPerSequence, PackedGemms::kShared}) {
    std::vector<KvCache> alone, batched;
    std::vector<HeadCall> calls;
    for (size_t i = 0; i < specs.size(); ++i) {
      alone.push_back(FilledHeadCache(head, specs[i].batch, specs[i].committed, 200 + i));
      batched.push_back(FilledHeadCache(head, specs[i].batch, specs[i].committed, 200 + i));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      calls.push_back(MakeHeadCall(batched[i], specs[i], i));
    }
    auto outputs = head.ForwardBatch(calls, gemms);
    ASSERT_OK(outputs);
    ASSERT_EQ(outputs->size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const HeadCall call = MakeHeadCall(alone[i], specs[i], i);
      auto expected = head.Forward(alone[i], call.token_embeddings, call.features, call.mask);
      ASSERT_OK(expected);
      const torch::Tensor& got = (*outputs)[i];
      ASSERT_EQ(got.sizes(), expected->sizes()) << "call " << i;
      EXPECT_EQ(batched[i].length(), alone[i].length()) << "call " << i;
      if (gemms == PackedGemms::kPerSequence) {
        EXPECT_TRUE(got.equal(*expected))
            << "call " << i << " differs by " << testing::MaxAbsDiff(got, *expected);
        EXPECT_TRUE(batched[i].Keys(0).equal(alone[i].Keys(0))) << "call " << i;
        EXPECT_TRUE(batched[i].Values(0).equal(alone[i].Values(0))) << "call " << i;
      } else {
        // Shared GEMMs: the same forward up to the last bits of float32.
        EXPECT_LT(testing::MaxAbsDiff(got, *expected), 1e-4) << "call " << i;
      }
    }
  }
}

TEST(ForwardBatchTest, ABadHeadCallFailsTheBatchBeforeAnyCacheMoves) {
  const EagleHead& head = *Family().eagle;
  KvCache a = FilledHeadCache(head, 2, 3, 1), b = FilledHeadCache(head, 2, 4, 2);
  HeadCall good = MakeHeadCall(a, {2, 3, 2, false}, 3);
  HeadCall bad = MakeHeadCall(b, {2, 4, 2, true}, 4);
  bad.mask = bad.mask.narrow(1, 0, 3);  // too few key columns
  auto outputs = head.ForwardBatch({good, bad}, PackedGemms::kPerSequence);
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outputs.status().message().find("mask"), std::string::npos)
      << outputs.status().ToString();
  EXPECT_EQ(a.length(), 3);
  EXPECT_EQ(b.length(), 4);
  auto shared = head.ForwardBatch({good, good}, PackedGemms::kPerSequence);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("share a cache"), std::string::npos);
  // The loop refuses the bad call at once, without queueing it.
  EngineLoop loop({256, PackedGemms::kPerSequence});
  auto refused = loop.Run(head, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loop.counters().forwards, 0);
}

// Random ids on an h x w grid of `resampler`'s input codebook.
torch::Tensor RandomIds(const Resampler& resampler, int64_t h, int64_t w, int64_t seed) {
  at::manual_seed(seed);
  return torch::randint(resampler.config().codebook_size, {1, h * w}, torch::kInt64);
}

TEST(ForwardBatchTest, ResampledImagesEqualTheirLoneResamplingInsideABatch) {
  const ModelSet& family = Family();
  const int64_t small = family.drafter->grid_size(), grid = family.target->grid_size();
  const int64_t r = family.upsampler->config().factor;
  struct Case {
    const Resampler* resampler;
    std::vector<int64_t> heights;  // ragged: the batch pads them to the tallest
    int64_t w;
  };
  const std::vector<Case> cases = {
      {family.upsampler.get(), {1, small, 3, small / 2, 2}, small},
      {family.downsampler.get(), {r, grid, 3 * r, grid / 2}, grid},
  };
  for (const Case& c : cases) {
    std::vector<ResampleCall> calls;
    for (size_t i = 0; i < c.heights.size(); ++i) {
      calls.push_back({RandomIds(*c.resampler, c.heights[i], c.w, 300 + i), c.heights[i], c.w});
    }
    auto per_sequence = c.resampler->ApplyBatch(calls, PackedGemms::kPerSequence);
    auto shared = c.resampler->ApplyBatch(calls, PackedGemms::kShared);
    ASSERT_OK(per_sequence);
    ASSERT_OK(shared);
    for (size_t i = 0; i < calls.size(); ++i) {
      auto expected = c.resampler->Apply(calls[i].ids, calls[i].h, calls[i].w);
      ASSERT_OK(expected);
      const int64_t out = c.resampler->OutputRows(calls[i].h) * c.resampler->OutputCols(c.w);
      ASSERT_EQ(expected->sizes(), (std::vector<int64_t>{1, out}));
      EXPECT_TRUE((*per_sequence)[i].equal(*expected)) << "image " << i;
      // One padded batch: row causality keeps the padding out of the real rows, and the
      // argmax survives the last-bit differences of the batched convolutions.
      ASSERT_EQ((*shared)[i].sizes(), expected->sizes()) << "image " << i;
      EXPECT_TRUE((*shared)[i].equal(*expected))
          << "image " << i << ": " << (*shared)[i].ne(*expected).sum().item<int64_t>() << " of "
          << out << " ids differ";
    }
  }
  // Control: padding at the top instead would shift every real row; the ids then differ.
  const Resampler& up = *family.upsampler;
  const torch::Tensor ids = RandomIds(up, 2, small, 7);
  auto lone = up.Apply(ids, 2, small);
  auto top_padded =
      up.Apply(torch::cat({torch::zeros({1, small}, torch::kInt64), ids}, 1), 3, small);
  ASSERT_OK(lone);
  ASSERT_OK(top_padded);
  EXPECT_FALSE(top_padded->narrow(1, r * r * small, 2 * r * r * small).equal(*lone));
}

using Job = SynthJob;

StatusOr<DecodeResult> DecodeJob(const Job& job, EngineLoop* loop, const CancelToken& cancel,
                                 ProgressSink& sink) {
  return DecodeSynthJob(job, Family(), loop, nullptr, cancel, sink);
}

std::vector<Job> EveryMethodTwice() { return testing::EveryMethodTwice(Family()); }

// The jobs stepped by `loop` on this thread, `concurrency` at a time.
std::vector<StatusOr<DecodeResult>> DecodeTogether(const std::vector<Job>& jobs, int concurrency,
                                                   EngineLoop& loop) {
  SetCpuThreads(1);
  std::vector<StatusOr<DecodeResult>> results(jobs.size(), InternalError("not run"));
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < jobs.size(); ++i) {
    tasks.push_back([&, i] {
      NullProgressSink sink;
      CancelToken cancel;
      results[i] = DecodeJob(jobs[i], &loop, cancel, sink);
    });
  }
  EngineLoop::ListSource source(std::move(tasks), concurrency);
  EXPECT_TRUE(loop.Serve(source).ok());
  return results;
}

// Each job decoded alone, without a loop.
void DecodeAlone(const std::vector<Job>& jobs, std::vector<DecodeResult>* results) {
  for (const Job& job : jobs) {
    NullProgressSink sink;
    CancelToken cancel;
    auto result = DecodeJob(job, nullptr, cancel, sink);
    ASSERT_OK(result);
    results->push_back(*result);
  }
}

// Each job's tokens decoded alone, without a loop.
void DecodeAlone(const std::vector<Job>& jobs, std::vector<std::vector<int32_t>>* tokens) {
  std::vector<DecodeResult> results;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &results));
  for (const DecodeResult& result : results) tokens->push_back(result.tokens);
}

TEST(EngineLoopTest, EveryMethodDecodesItsLoneTokensInsideMixedBatches) {
  const std::vector<Job> jobs = EveryMethodTwice();
  ASSERT_GE(AvailableMethods(Family()).size(), 10u);
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  EngineLoop loop({/*max_rows=*/256, PackedGemms::kPerSequence});
  auto together = DecodeTogether(jobs, 6, loop);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i])
        << jobs[i].method << " at temperature " << jobs[i].temperature;
  }
  // The batches really mixed requests: most forwards carried several.
  const EngineLoop::Counters counters = loop.counters();
  EXPECT_GE(counters.max_calls, 4);
  EXPECT_GT(counters.calls, 2 * counters.forwards)
      << counters.calls << " calls in " << counters.forwards << " forwards";
  EXPECT_EQ(counters.requests, static_cast<int64_t>(jobs.size()));
  EXPECT_EQ(counters.most_active, 6);
}

// Batches the loop ran, by component: how many, and the calls they carried.
struct ComponentCounts {
  std::map<EngineLoop::Component, int64_t> batches, calls;
  EngineLoop::Observer Observer() {
    return [this](const EngineLoop::BatchEvent& event) {
      ++batches[event.component];
      calls[event.component] += event.calls;
    };
  }
};

TEST(EngineLoopTest, RequestsInStepMeetInEveryForwardAndDrawWithoutWaiting) {
  // Four ar requests step together: the loop runs a batch only once all four wait, so each of
  // their 256 forwards (the prefill and 255 appends) is one forward of four, and each of their
  // 256 token draws one batched draw of four (one request greedy: its rows are drawn apart
  // inside the batch, by argmax), and each of their 16 row reads (ar reads its tokens once per
  // row of 16) one batched read of four. With threads meeting at a timed rendezvous, a request
  // busy sampling missed batches.
  const std::vector<Job> jobs = {{"ar", 0, 1.0}, {"ar", 1, 1.0}, {"ar", 2, 0.0}, {"ar", 3, 1.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  ComponentCounts counts;
  EngineLoop loop({256, PackedGemms::kPerSequence}, counts.Observer());
  auto together = DecodeTogether(jobs, 4, loop);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i]) << i;
    EXPECT_EQ(together[i]->stats.target_forward_passes, 256);
  }
  using C = EngineLoop::Component;
  EXPECT_EQ(counts.batches[C::kTransformer], 256);
  EXPECT_EQ(counts.calls[C::kTransformer], 4 * 256);
  EXPECT_EQ(counts.batches[C::kSampler], 256);
  EXPECT_EQ(counts.calls[C::kSampler], 4 * 256);
  EXPECT_EQ(counts.batches[C::kHostRead], 16);
  EXPECT_EQ(counts.calls[C::kHostRead], 4 * 16);
  const EngineLoop::Counters counters = loop.counters();
  EXPECT_EQ(counters.forwards, 2 * 256 + 16);
  EXPECT_EQ(counters.rounds, 2 * 256 + 16);
}

TEST(EngineLoopTest, ALoneRequestRunsEveryForwardAndDrawThroughTheLoop) {
  // One request alone: its prefill, 255 causal appends and 256 draws are batches of one
  // (a plain Forward, which replays a pool's graphs as a direct call would), and its tokens
  // are its tokens without a loop.
  const std::vector<Job> jobs = {{"ar", 3, 1.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  ComponentCounts counts;
  EngineLoop loop({256, PackedGemms::kPerSequence}, counts.Observer());
  auto result = DecodeTogether(jobs, 1, loop);
  ASSERT_OK(result[0]);
  EXPECT_EQ(result[0]->tokens, alone[0]);
  EXPECT_EQ(counts.calls[EngineLoop::Component::kTransformer], 256);
  EXPECT_EQ(counts.calls[EngineLoop::Component::kSampler], 256);
  EXPECT_EQ(loop.counters().max_calls, 1);
  EXPECT_EQ(result[0]->stats.target_forward_passes, 256);
}

TEST(EngineLoopTest, RequestsJoinARunningLoopBetweenSteps) {
  // Six requests, at most two at once: each new one starts as soon as one ends, while the
  // other is mid-image, and decodes its lone tokens.
  const std::vector<Job> jobs = {{"ar", 0, 1.0},  {"sjd", 1, 1.0}, {"mulo", 2, 1.0},
                                 {"ar", 3, 0.0},  {"eagle", 4, 1.0}, {"zipar", 5, 1.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  EngineLoop loop({256, PackedGemms::kPerSequence});
  auto together = DecodeTogether(jobs, 2, loop);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i]) << jobs[i].method;
  }
  EXPECT_EQ(loop.counters().requests, 6);
  EXPECT_EQ(loop.counters().most_active, 2);
  EXPECT_EQ(loop.counters().max_calls, 2);
}

TEST(EngineLoopTest, TheHeadAndTheResamplersBatchAcrossRequestsExactly) {
  // Three MuLo-SD and three EAGLE-head requests decode together: their U_r / D_r calls and
  // head forwards run as batched forwards of several requests, and every request decodes
  // exactly its lone tokens. Two of each kind are the same request: they make the same calls
  // in the same order, so they meet in the same batches; the third of each differs.
  const std::vector<Job> jobs = {{"mulo", 1, 1.0},  {"mulo", 1, 1.0},  {"mulo", 2, 0.0},
                                 {"eagle", 4, 1.0}, {"eagle", 4, 1.0}, {"lantern", 5, 1.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  std::mutex mu;
  std::map<EngineLoop::Component, int64_t> most_calls, batched_calls;
  EngineLoop loop({256, PackedGemms::kPerSequence}, [&](const EngineLoop::BatchEvent& event) {
    std::lock_guard<std::mutex> lock(mu);
    most_calls[event.component] = std::max(most_calls[event.component], event.calls);
    if (event.calls > 1) batched_calls[event.component] += event.calls;
  });
  auto together = DecodeTogether(jobs, static_cast<int>(jobs.size()), loop);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i])
        << jobs[i].method << " at temperature " << jobs[i].temperature;
  }
  using C = EngineLoop::Component;
  for (C component : {C::kTransformer, C::kEagleHead, C::kResampler}) {
    EXPECT_GE(most_calls[component], 2) << EngineLoop::ComponentName(component);
    EXPECT_GT(batched_calls[component], 0) << EngineLoop::ComponentName(component);
  }
  EXPECT_LE(most_calls[C::kEagleHead], 3);  // only the three tree requests have a head
  EXPECT_LE(most_calls[C::kResampler], 3);  // only the three MuLo-SD requests resample
}

TEST(EngineLoopTest, ChainVerificationsBatchAcrossRequestsExactly) {
  // The chain methods' verifications (speculative, SJD, GSD, MC-SJD; two of each, one greedy)
  // are judged in batches of several requests, one host read per batch, and their other reads
  // batch as well; every request decodes its lone tokens and counts the host reads it counts
  // alone (the batch's read included).
  const std::vector<Job> jobs = {{"speculative", 0, 1.0}, {"speculative", 1, 0.0},
                                 {"sjd", 2, 1.0},         {"sjd", 3, 1.0},
                                 {"gsd", 4, 1.0},         {"gsd", 5, 0.0},
                                 {"mc_sjd", 6, 1.0},      {"mc_sjd", 7, 1.0}};
  std::vector<DecodeResult> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  ComponentCounts counts;
  EngineLoop loop({256, PackedGemms::kPerSequence}, counts.Observer());
  const int64_t reads_before = HostReadCount();  // this thread's: the loop's batched reads
  auto together = DecodeTogether(jobs, static_cast<int>(jobs.size()), loop);
  const int64_t loop_reads = HostReadCount() - reads_before;
  int64_t verify_steps = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i].tokens) << jobs[i].method << " " << i;
    EXPECT_EQ(together[i]->stats.host_syncs, alone[i].stats.host_syncs) << jobs[i].method;
    verify_steps += together[i]->stats.verify_steps;
  }
  using C = EngineLoop::Component;
  EXPECT_EQ(counts.calls[C::kVerifier], verify_steps);
  EXPECT_GT(counts.calls[C::kVerifier], 2 * counts.batches[C::kVerifier])
      << counts.calls[C::kVerifier] << " judgements in " << counts.batches[C::kVerifier]
      << " batches";
  // The requests' other reads (drafts, Jacobi re-draws, first tokens) batch too: the loop read
  // the host once per batch of judgements or reads and dtype, fewer times than the requests
  // counted. The only reads that are not int64 are the first-token draws' probabilities (a
  // draw on the CPU ends on the host), one per request, so at most that many batches read twice.
  const int64_t batches = counts.batches[C::kVerifier] + counts.batches[C::kHostRead];
  EXPECT_GE(loop_reads, batches);
  EXPECT_LE(loop_reads, batches + static_cast<int64_t>(jobs.size()));
  int64_t request_reads = 0;
  for (const auto& result : together) request_reads += result->stats.host_syncs;
  EXPECT_LT(2 * loop_reads, request_reads) << loop_reads << " reads for " << request_reads;
}

TEST(EngineLoopTest, DynamicTreeReadsBatchAcrossRequestsExactly) {
  // Tree steps (eagle, lantern++): EAGLE-2's one read of its tree and verdict, LANTERN++'s read
  // of its tree and its verifier's of p and q, and the first token's draw go through the loop,
  // batched with the other requests';
  // each request decodes its lone tokens and counts the reads it counts alone.
  const std::vector<Job> jobs = {{"eagle", 0, 1.0}, {"eagle", 1, 0.0}, {"lantern++", 2, 1.0}};
  std::vector<DecodeResult> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  ComponentCounts counts;
  EngineLoop loop({256, PackedGemms::kPerSequence}, counts.Observer());
  auto together = DecodeTogether(jobs, static_cast<int>(jobs.size()), loop);
  int64_t request_reads = 0, verify_steps = 0, expected_reads = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(together[i]);
    EXPECT_EQ(together[i]->tokens, alone[i].tokens) << jobs[i].method << " " << i;
    EXPECT_EQ(together[i]->stats.host_syncs, alone[i].stats.host_syncs) << jobs[i].method;
    request_reads += together[i]->stats.host_syncs;
    verify_steps += together[i]->stats.verify_steps;
    // EAGLE-2 reads its tree with its verdict (verified on the device); LANTERN++'s static
    // tree reads the tree, then p and q.
    const int64_t per_step = jobs[i].method == "eagle" ? 1 : 2;
    expected_reads += per_step * together[i]->stats.verify_steps + 1;
  }
  using C = EngineLoop::Component;
  // Every read the requests count goes through the loop: one or two per step and each one's
  // first token (DecodeSession::Draw).
  EXPECT_EQ(counts.calls[C::kHostRead], expected_reads);
  EXPECT_EQ(counts.calls[C::kHostRead], request_reads);
  EXPECT_LT(counts.batches[C::kHostRead], counts.calls[C::kHostRead]);
  std::cout << "[reads] requests " << request_reads << ", through the loop "
            << counts.calls[C::kHostRead] << " in " << counts.batches[C::kHostRead]
            << " batches, verify steps " << verify_steps << std::endl;
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

TEST(EngineLoopTest, ACancelledRequestLeavesAndTheOthersFinishExactly) {
  const std::vector<Job> jobs = {{"ar", 0, 1.0}, {"mulo", 1, 1.0}, {"ar", 2, 0.0}};
  std::vector<std::vector<int32_t>> alone;
  ASSERT_NO_FATAL_FAILURE(DecodeAlone(jobs, &alone));
  EngineLoop loop({256, PackedGemms::kPerSequence});
  std::vector<StatusOr<DecodeResult>> results(jobs.size() + 1, InternalError("not run"));
  std::vector<EngineLoop::Task> tasks;
  for (size_t i = 0; i < jobs.size(); ++i) {
    tasks.push_back([&, i] {
      NullProgressSink sink;
      CancelToken cancel;
      results[i] = DecodeJob(jobs[i], &loop, cancel, sink);
    });
  }
  int64_t cancelled_after_rounds = -1;
  tasks.push_back([&] {
    CancelToken cancel;
    CancelAfterRows sink(&cancel, 2);
    results.back() = DecodeJob({"speculative", 3, 1.0}, &loop, cancel, sink);
    cancelled_after_rounds = loop.counters().rounds;
  });
  SetCpuThreads(1);
  EngineLoop::ListSource source(std::move(tasks), 4);
  ASSERT_TRUE(loop.Serve(source).ok());
  ASSERT_FALSE(results.back().ok());
  EXPECT_EQ(results.back().status().code(), StatusCode::kCancelled);
  // It left within a step of its second row, while the others had most of their images to
  // go (the ar requests alone take 256 rounds).
  const int64_t rounds = loop.counters().rounds;
  EXPECT_GT(cancelled_after_rounds, 0);
  EXPECT_LT(cancelled_after_rounds, rounds / 2) << "of " << rounds;
  EXPECT_GE(rounds, 256);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_OK(results[i]);
    EXPECT_EQ(results[i]->tokens, alone[i]) << jobs[i].method;
  }
}

}  // namespace
}  // namespace mulo::engine
