// The one way a front end reaches the engine: a loaded family behind four calls. The server reads
// the wire into an ImageRequest (plain values, named as the request's fields) and then
//   Plan     checks the request against the family and resolves its method (validate, plan),
//   Run      decodes a plan into tokens and an image, streaming committed rows,
//   Preview  turns the rows committed so far into pixels,
//   Describe says what the family takes and runs (for model listings).
// Nothing here returns a model part: the server never names a conditioner, a VQ decoder or a
// stage. Errors are INVALID_ARGUMENT naming the request's field ("sampling.top_k: ...",
// "condition: 12 floats, expected ...").
#ifndef MULO_ENGINE_API_IMAGE_ENGINE_H_
#define MULO_ENGINE_API_IMAGE_ENGINE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/decoding_method.h"
#include "engine/decode/generate.h"
#include "engine/decode/kv_demand.h"
#include "engine/decode/method_registry.h"
#include "engine/model/condition.h"
#include "engine/model/model_set.h"
#include "engine/sampling/sampling_params.h"

namespace mulo::engine {

// One option of the request's method, as its spec names it ("tree.top_k", option_spec.h).
struct MethodOption {
  std::string name;
  double value = 0.0;
  // For an option with choices: the chosen name. Empty: `value` is the choice's index.
  std::string choice;
};

// What a request asks of the engine, read off the wire.
struct ImageRequest {
  // The prompt's text for a family whose text stage tokenises it in the engine; empty when
  // `condition` carries the prompt's ids (written by a text/ prompt encoder) or no prompt.
  std::string prompt;
  // Class label, TA-Tok ids, prompt or caption ids, caption_length (condition.h).
  Condition condition;
  // Precomputed condition features, row-major (rows x width of the target's condition).
  std::vector<float> features;
  SamplingParams sampling;
  bool family_cfg_scale = true;  // sampling.cfg_scale unset: the family's default
  std::string method;            // a registry name, or "auto"
  std::vector<MethodOption> method_options;
  // How a decoding text stage (an MLLM's ids) runs; empty: ar.
  std::string text_stage_method;
};

// A checked request, ready to run.
struct ImagePlan {
  std::string method;          // the registry's name (what `auto` chose)
  MethodConfig method_config;  // its options, chosen_by set for `auto`
  std::shared_ptr<const DecodingMethod> decoder;
  std::shared_ptr<const DecodingMethod> text_stage_decoder;  // null: ar
  std::string prompt;
  Condition condition;
  SamplingParams sampling;
  KvDemand kv_demand;  // what the method opens in the worker's pools (kv_pools.h)
  // The draft trees the method expands or verifies per step, for a server's bounds.
  std::vector<TreeDemand> trees;
};

// What a family takes and runs, for a model listing.
struct FamilyDescription {
  int64_t image_width = 0, image_height = 0;
  int64_t grid_size = 0;
  int64_t vocab_size = 0;
  std::vector<std::string> methods;
  double default_cfg_scale = 1.0;
  // How it takes its condition: "prompt", "condition", "class_label", "condition_tokens".
  std::vector<std::string> conditions;
  int64_t condition_width = 0;  // "condition" rows' width
  int64_t num_classes = 0;      // "class_label" families
  int64_t condition_rows = 0;
  std::string auto_method;  // what `auto` runs here and why
  std::string auto_choice;  // the method `auto` runs here (empty when it cannot choose)
};

class ImageEngine {
 public:
  // The family at `dir` (model_set.h), its method defaults checked, so that a bad family.json
  // fails at start-up rather than on the first request.
  static StatusOr<std::unique_ptr<ImageEngine>> Load(const std::string& dir,
                                                     const LoadOptions& options);
  explicit ImageEngine(ModelSet models) : models_(std::move(models)) {}

  // Checks the condition, sampling and method against the family (INVALID_ARGUMENT naming the
  // field) and resolves `auto` and the family's defaults.
  StatusOr<ImagePlan> Plan(ImageRequest request) const;

  // Decodes `plan`, handing committed rows to `progress`; DEADLINE_EXCEEDED or CANCELLED when
  // `cancel` says so. `options` places the forwards (a worker's loop and pools).
  StatusOr<GenerateResult> Run(const ImagePlan& plan, ProgressSink& progress,
                               const CancelToken& cancel, GenerateOptions options) const;

  // The image of the first `rows` rows: `tokens` holds them in raster order (rows x
  // grid_size ids; the VQ decoder is convolutional, so committed rows decode on their own).
  StatusOr<RgbImage> Preview(const std::vector<int32_t>& tokens, int64_t rows) const;

  FamilyDescription Describe() const;

  int64_t grid_size() const;  // the token grid is square: rows of grid_size tokens

  // The loaded family, for the worker's start-up (pools, graphs, weight sizes); requests go
  // through the calls above.
  const ModelSet& models() const { return models_; }

 private:
  Status PlanCondition(ImageRequest& request, ImagePlan& plan) const;
  Status PlanMethod(const ImageRequest& request, ImagePlan& plan) const;
  Status PlanTextStage(const ImageRequest& request, ImagePlan& plan) const;

  const ModelSet models_;
};

// The methods a decoding text stage (an MLLM) may run: those the stage family runs that are
// lossless at its defaults (ar, sjd, mc_sjd, sjd_pac for a stage without drafters).
std::vector<std::string> TextStageMethods(const ModelSet& stage);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_API_IMAGE_ENGINE_H_
