#include "engine/decode/ar.h"

namespace mulo::engine {
namespace {

class ArState : public SteppedMethod::State {
 public:
  explicit ArState(ModelStream* target) : target_(target) {}

  // x_i ~ p(. | x_<i); feed x_i (the last token is never fed back).
  Status Step(DecodeSession& session) override {
    {
      auto timer = session.Time(Phase::kSampling);
      session.Append(session.Draw(target_->next_logits(), RngStream::kTarget));
    }
    if (session.done()) return OkStatus();
    auto timer = session.Time(Phase::kTargetForward);
    const int64_t i = static_cast<int64_t>(session.committed().size()) - 1;
    return target_->Feed(session.committed(), i, i + 1).status();
  }

 private:
  ModelStream* target_;
};

}  // namespace

Status ArDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr) return FailedPreconditionError("ar: no target model loaded");
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedMethod::State>> ArDecoder::Begin(DecodeSession& session) const {
  MULO_ASSIGN_OR_RETURN(ModelStream * target,
                        session.Open(*session.models().target, StreamRole::kTarget));
  return std::unique_ptr<State>(std::make_unique<ArState>(target));
}

}  // namespace mulo::engine
