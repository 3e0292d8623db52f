#include "engine/model/family_components.h"

#include <algorithm>
#include <utility>

#include "engine/model/condition_stages.h"

namespace mulo::engine {
namespace {

Status LoadTarget(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(c.set.target, LoadTokenModel({c.dir, c.options, c.grid_size}));
  return OkStatus();
}

// The VQ decoder, and the target against it (and against the text conditioner, loaded above).
Status LoadVq(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(c.set.vq, VqDecoder::LoadDirectory(c.dir, c.options));
  return CheckArModel("target", *c.set.target, c.set);
}

// The bundled family's text encoder: prompt -> clip_cond features.
Status LoadTextConditioner(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(c.set.conditioner, TextConditioner::LoadDirectory(c.dir, c.options));
  c.conditioners.push_back(TextEncoderStage(c.set.conditioner));
  return OkStatus();
}

// A caption encoder (FLAN-T5): caption ids -> the target's caption features.
Status LoadT5(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(std::shared_ptr<const T5Encoder> t5,
                        T5Encoder::LoadDirectory(c.dir, c.options));
  const ConditionShape& shape = c.set.target->condition_shape();
  if (shape.mode != ConditionMode::kCaption || shape.width != t5->config().d_model) {
    return FailedPreconditionError(
        "t5: the encoder's features are " + std::to_string(t5->config().d_model) +
        " wide; the target needs caption features (cls_embedding.cap_proj) of that width, "
        "it reads " +
        std::to_string(shape.width));
  }
  c.conditioners.push_back(T5CaptionStage(std::move(t5), shape.rows));
  return OkStatus();
}

// An image-token de-quantiser (TA-Tok): ids -> clip_cond features, a square count of them.
Status LoadTaTok(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(c.set.ta_tok, TaTokDequantizer::LoadDirectory(c.dir, c.options));
  const ConditionShape& t = c.set.target->condition_shape();
  if (t.mode != ConditionMode::kClipCond || t.width != c.set.ta_tok->config().hidden ||
      !TaTokDequantizer::IsSquare(t.rows)) {
    return FailedPreconditionError(
        "ta_tok: the de-quantiser's [n, " + std::to_string(c.set.ta_tok->config().hidden) +
        "] features do not fit the target's condition (clip_cond [" + std::to_string(t.rows) +
        ", " + std::to_string(t.width) + "] with a square count expected)");
  }
  c.conditioners.push_back(TaTokStage(c.set.ta_tok, t.rows));
  return OkStatus();
}

// A language model writing TA-Tok ids from the prompt's text ids, as a family of its own (its
// target is the MLLM, no VQ), so any single-model method decodes it.
Status LoadMllm(ComponentLoad& c) {
  if (c.set.ta_tok == nullptr) {
    return c.family.Error("components.mllm", "needs components.ta_tok: the MLLM writes TA-Tok ids");
  }
  // The MLLM writes exactly the target's condition rows: a square of them (729 = 27^2 for
  // Tar's scale 0, 169 and 81 for 1 and 2).
  const int64_t rows = c.set.target->condition_shape().rows;
  int64_t grid = 1;
  while (grid * grid < rows) ++grid;
  auto stage = std::make_shared<ModelSet>();
  stage->name = c.set.name + "/mllm";
  stage->default_cfg_scale = 1.0;
  MULO_ASSIGN_OR_RETURN(stage->target, LoadTokenModel({c.dir, c.options, grid}));
  if (stage->target->condition_shape().mode != ConditionMode::kPromptIds) {
    return c.family.Error("components.mllm", "is a " + stage->target->architecture() +
                                                 " model, which reads no prompt");
  }
  if (stage->target->vocab_size() != c.set.ta_tok->config().codebook_size) {
    return FailedPreconditionError("mllm: " + std::to_string(stage->target->vocab_size()) +
                                   " image tokens, the ta_tok codebook has " +
                                   std::to_string(c.set.ta_tok->config().codebook_size));
  }
  c.set.mllm_stage = std::move(stage);
  // The MLLM writes the ids the TA-Tok stage reads: its stage goes just before that one.
  auto ta_tok_stage = std::find_if(c.conditioners.begin(), c.conditioners.end(),
                                   [](auto& s) { return s->input() == ConditionForm::kTaTokIds; });
  c.conditioners.insert(ta_tok_stage, MllmStage(c.set.mllm_stage));
  return OkStatus();
}

// Another AR model over the same tokens: MuLo-SD's drafter, speculative's chain.
template <std::shared_ptr<const TokenModel> ModelSet::*slot>
Status LoadArModel(ComponentLoad& c, const char* key) {
  MULO_ASSIGN_OR_RETURN(c.set.*slot, LoadTokenModel({c.dir, c.options}));
  return CheckArModel(key, *(c.set.*slot), c.set);
}
Status LoadDrafter(ComponentLoad& c) { return LoadArModel<&ModelSet::drafter>(c, "drafter"); }
Status LoadChain(ComponentLoad& c) { return LoadArModel<&ModelSet::chain>(c, "chain"); }

// MuLo-SD's up- and down-samplers between the drafter's grid and the target's.
template <std::shared_ptr<const Resampler> ModelSet::*slot>
Status LoadResampler(ComponentLoad& c, const char* key) {
  MULO_ASSIGN_OR_RETURN(c.set.*slot, Resampler::LoadDirectory(c.dir, c.options));
  if ((c.set.*slot)->config().codebook_size != c.set.vq->config().codebook_size) {
    return FailedPreconditionError(std::string(key) + ": codebook size differs from the VQ's");
  }
  return OkStatus();
}
Status LoadUpsampler(ComponentLoad& c) {
  MULO_RETURN_IF_ERROR(LoadResampler<&ModelSet::upsampler>(c, "upsampler"));
  if (c.set.drafter != nullptr &&
      c.set.drafter->grid_size() * c.set.upsampler->config().factor != c.set.target->grid_size()) {
    return FailedPreconditionError("drafter grid x up-sampling factor != target grid");
  }
  return OkStatus();
}
Status LoadDownsampler(ComponentLoad& c) {
  return LoadResampler<&ModelSet::downsampler>(c, "downsampler");
}

// An EAGLE-style head over the target's features.
Status LoadEagle(ComponentLoad& c) {
  MULO_ASSIGN_OR_RETURN(c.set.eagle, EagleHead::LoadDirectory(c.dir, *c.set.target, c.options));
  return OkStatus();
}

}  // namespace

const std::vector<FamilyComponent>& FamilyComponents() {
  // Conditioners push their stages in the default pipeline's order: conditioner, t5, mllm,
  // ta_tok (ta_tok's model loads before the MLLM, which checks it and goes before its stage).
  static const std::vector<FamilyComponent> kComponents = {
      {"target", true, &LoadTarget},
      {"conditioner", false, &LoadTextConditioner},
      {"vq", true, &LoadVq},
      {"t5", false, &LoadT5},
      {"ta_tok", false, &LoadTaTok},
      {"mllm", false, &LoadMllm},
      {"drafter", false, &LoadDrafter},
      {"chain", false, &LoadChain},
      {"upsampler", false, &LoadUpsampler},
      {"downsampler", false, &LoadDownsampler},
      {"eagle", false, &LoadEagle},
  };
  return kComponents;
}

std::string FamilyComponentKeys() {
  std::string keys;
  for (const FamilyComponent& component : FamilyComponents()) {
    keys += (keys.empty() ? "" : ", ") + std::string(component.key);
  }
  return keys;
}

Status CheckArModel(const std::string& role, const TokenModel& model, const ModelSet& set) {
  const ConditionShape& c = model.condition_shape();
  if (model.vocab_size() != set.vq->config().codebook_size) {
    return FailedPreconditionError(role + ": vocab_size " + std::to_string(model.vocab_size()) +
                                   " != VQ codebook_size " +
                                   std::to_string(set.vq->config().codebook_size));
  }
  if (set.conditioner != nullptr) {
    const auto& t = set.conditioner->config();
    if (c.mode != ConditionMode::kClipCond || c.width != t.dim || c.rows != t.max_tokens) {
      return FailedPreconditionError(role + ": expects clip_cond features [" +
                                     std::to_string(c.rows) + ", " + std::to_string(c.width) +
                                     "], the conditioner gives [" + std::to_string(t.max_tokens) +
                                     ", " + std::to_string(t.dim) + "]");
    }
  }
  return OkStatus();
}

}  // namespace mulo::engine
