#include "engine/model/condition.h"

#include <string>

namespace mulo::engine {

Status CheckCaptionLength(const ConditionShape& c, int64_t caption_length) {
  if (caption_length == 0) return OkStatus();
  if (c.mode != ConditionMode::kCaption) {
    return InvalidArgumentError("caption_length: only for caption (LlamaGen t2i) models");
  }
  if (caption_length < 0 || caption_length > c.rows) {
    return InvalidArgumentError("caption_length: " + std::to_string(caption_length) +
                                " is outside [0, " + std::to_string(c.rows) +
                                "], the model's caption rows");
  }
  return OkStatus();
}

Status CheckClassLabel(const ConditionShape& c, int64_t class_label) {
  if (c.mode != ConditionMode::kClassLabel) {
    return InvalidArgumentError("class_label: only for class-conditional (LlamaGen c2i) models");
  }
  if (class_label < 0 || class_label >= c.num_classes) {
    return InvalidArgumentError("class_label: " + std::to_string(class_label) +
                                " is outside [0, " + std::to_string(c.num_classes) + ")");
  }
  return OkStatus();
}

}  // namespace mulo::engine
