#include "engine/model/condition_stages.h"

#include <string>
#include <utility>
#include <vector>

#include "engine/model/caption_condition.h"
#include "engine/model/model_set.h"

namespace mulo::engine {
namespace {

class TextEncoder final : public Conditioner {
 public:
  explicit TextEncoder(std::shared_ptr<const TextConditioner> model) : model_(std::move(model)) {}
  std::string name() const override { return "conditioner"; }
  ConditionForm input() const override { return ConditionForm::kPrompt; }
  ConditionForm output() const override { return ConditionForm::kFeatures; }
  StatusOr<Condition> Run(const Condition& in, StageDecoder&) const override {
    Condition out = in;
    MULO_ASSIGN_OR_RETURN(out.features, model_->Encode(in.prompt));
    out.prompt.clear();
    return out;
  }

 private:
  std::shared_ptr<const TextConditioner> model_;
};

class T5Caption final : public Conditioner {
 public:
  T5Caption(std::shared_ptr<const T5Encoder> encoder, int64_t rows)
      : encoder_(std::move(encoder)), rows_(rows) {}
  std::string name() const override { return "t5"; }
  ConditionForm input() const override { return ConditionForm::kCaptionIds; }
  ConditionForm output() const override { return ConditionForm::kFeatures; }
  StatusOr<Condition> Run(const Condition& in, StageDecoder&) const override {
    const int64_t n = static_cast<int64_t>(in.caption_ids.size());
    if (n < 1 || n > rows_) {
      return InvalidArgumentError("caption_ids: " + std::to_string(n) +
                                  " tokens; the family's condition takes 1 to " +
                                  std::to_string(rows_));
    }
    for (int64_t id : in.caption_ids) {
      if (id < 0 || id >= encoder_->config().vocab_size) {
        return InvalidArgumentError("caption_ids: " + std::to_string(id) +
                                    " is outside FLAN-T5's vocabulary [0, " +
                                    std::to_string(encoder_->config().vocab_size) + ")");
      }
    }
    // Upstream pads to the condition's rows with T5's pad id (0) and masks the padding out.
    std::vector<int64_t> ids = in.caption_ids, mask(n, 1);
    ids.resize(rows_, 0);
    mask.resize(rows_, 0);
    MULO_ASSIGN_OR_RETURN(Condition caption, T5CaptionCondition(*encoder_, ids, mask, rows_));
    Condition out = in;
    out.features = caption.features;
    out.caption_length = caption.caption_length;
    out.caption_ids.clear();
    return out;
  }

 private:
  std::shared_ptr<const T5Encoder> encoder_;
  int64_t rows_;
};

class Mllm final : public Conditioner {
 public:
  explicit Mllm(std::shared_ptr<const ModelSet> stage) : stage_(std::move(stage)) {}
  std::string name() const override { return "mllm"; }
  ConditionForm input() const override { return ConditionForm::kPromptIds; }
  ConditionForm output() const override { return ConditionForm::kTaTokIds; }
  StatusOr<Condition> Run(const Condition& in, StageDecoder& decoder) const override {
    Condition out = in;
    MULO_ASSIGN_OR_RETURN(out.ta_tok_ids, decoder.Decode(*stage_, in.prompt_ids));
    out.prompt_ids.clear();
    return out;
  }

 private:
  std::shared_ptr<const ModelSet> stage_;
};

class TaTok final : public Conditioner {
 public:
  TaTok(std::shared_ptr<const TaTokDequantizer> model, int64_t rows)
      : model_(std::move(model)), rows_(rows) {}
  std::string name() const override { return "ta_tok"; }
  ConditionForm input() const override { return ConditionForm::kTaTokIds; }
  ConditionForm output() const override { return ConditionForm::kFeatures; }
  StatusOr<Condition> Run(const Condition& in, StageDecoder&) const override {
    MULO_RETURN_IF_ERROR(CheckTaTokIds(*model_, rows_, in.ta_tok_ids));
    Condition out = in;
    MULO_ASSIGN_OR_RETURN(out.features, model_->Decode(in.ta_tok_ids));
    out.ta_tok_ids.clear();
    return out;
  }

 private:
  std::shared_ptr<const TaTokDequantizer> model_;
  int64_t rows_;
};

}  // namespace

std::shared_ptr<const Conditioner> TextEncoderStage(std::shared_ptr<const TextConditioner> model) {
  return std::make_shared<const TextEncoder>(std::move(model));
}

std::shared_ptr<const Conditioner> T5CaptionStage(std::shared_ptr<const T5Encoder> encoder,
                                                  int64_t rows) {
  return std::make_shared<const T5Caption>(std::move(encoder), rows);
}

std::shared_ptr<const Conditioner> MllmStage(std::shared_ptr<const ModelSet> stage) {
  return std::make_shared<const Mllm>(std::move(stage));
}

std::shared_ptr<const Conditioner> TaTokStage(std::shared_ptr<const TaTokDequantizer> model,
                                              int64_t rows) {
  return std::make_shared<const TaTok>(std::move(model), rows);
}

Status CheckTaTokIds(const TaTokDequantizer& model, int64_t rows,
                     const std::vector<int64_t>& ids) {
  if (static_cast<int64_t>(ids.size()) != rows) {
    return InvalidArgumentError("condition_tokens: " + std::to_string(ids.size()) +
                                " ids, the model takes " + std::to_string(rows) +
                                " (Tar: 729, 169 or 81 by scale)");
  }
  return model.CheckIds(ids);
}

}  // namespace mulo::engine
