// Requests of the bundled synth family for the tests that decode many methods side by side
// (batching_test, kv_pools_test): the family, its held-out prompts and a job per method.
#ifndef MULO_TESTS_ENGINE_DECODE_SYNTH_JOBS_H_
#define MULO_TESTS_ENGINE_DECODE_SYNTH_JOBS_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/decode/decoding_method.h"
#include "engine/model/model_set.h"

namespace mulo::engine::testing {

// models/synth loaded with `options`, on one CPU thread (null, with a test failure, when it
// does not load).
std::shared_ptr<const ModelSet> LoadSynthFamily(const LoadOptions& options = LoadOptions());
// The family with the default options, loaded once.
const ModelSet& SynthFamily();
// The first `count` held-out prompts (synth/heldout.h reads the set).
std::vector<std::string> SynthPrompts(int count);

// One request: a method at its family defaults, held-out prompt `prompt` (of the first 8),
// the family's guidance, `temperature` and seed 1000 + prompt.
struct SynthJob {
  std::string method;
  int prompt;
  double temperature;
};
// Every method `family` serves at temperature 0 and 1, prompts 0..7 in turn.
std::vector<SynthJob> EveryMethodTwice(const ModelSet& family);
// The job's request (condition, sampling), without loop or reservation.
DecodeRequest SynthRequest(const SynthJob& job, const ModelSet& family);
// Decodes the job on `family`, its forwards through `loop` and its caches from `kv` (each
// optional).
StatusOr<DecodeResult> DecodeSynthJob(const SynthJob& job, const ModelSet& family,
                                      EngineLoop* loop, KvReservation* kv,
                                      const CancelToken& cancel, ProgressSink& sink);

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_SYNTH_JOBS_H_
