#include "server/proto_conversions.h"

#include <string>

namespace mulo::server {

void FillStats(const engine::Stats& s, double queue_seconds, v1::Stats* out) {
  out->set_tokens(static_cast<uint32_t>(s.tokens));
  out->set_target_forward_passes(static_cast<uint32_t>(s.target_forward_passes));
  out->set_draft_forward_passes(static_cast<uint32_t>(s.draft_forward_passes));
  out->set_drafted_tokens(static_cast<uint32_t>(s.drafted_tokens));
  out->set_accepted_tokens(static_cast<uint32_t>(s.accepted_tokens));
  out->set_resampled_tokens(static_cast<uint32_t>(s.resampled_tokens));
  out->set_relaxed_accepted_tokens(static_cast<uint32_t>(s.relaxed_accepted_tokens));
  out->set_expansion_resampled_tokens(static_cast<uint32_t>(s.expansion_resampled_tokens));
  out->set_prefix_own_tokens(static_cast<uint32_t>(s.prefix_own_tokens));
  out->set_prefix_downsampled_tokens(static_cast<uint32_t>(s.prefix_downsampled_tokens));
  out->set_pooled_drafts(static_cast<uint32_t>(s.pooled_drafts));
  out->set_mean_pooled_neighbors(s.MeanPooledNeighbors());
  out->set_step_compression(s.StepCompression());
  out->set_acceptance_rate(s.AcceptanceRate());
  for (int64_t n : s.accepted_per_position) out->add_accepted_per_position(static_cast<uint32_t>(n));
  out->set_mean_accepted_length(s.MeanAcceptedLength());
  out->set_iterations(static_cast<uint32_t>(s.verify_steps));
  out->set_text_stage_tokens(static_cast<uint32_t>(s.text_stage_tokens));
  out->set_text_stage_forward_passes(static_cast<uint32_t>(s.text_stage_forward_passes));
  out->set_mean_tree_depth(s.MeanDraftedTreeDepth());
  out->set_mean_tree_width(s.MeanDraftedTreeWidth());
  for (int i = 0; i < engine::kNumPhases; ++i) {
    if (s.phase_seconds[i] > 0) {
      (*out->mutable_phase_seconds())[engine::PhaseName(static_cast<engine::Phase>(i))] =
          s.phase_seconds[i];
    }
  }
  out->set_queue_seconds(queue_seconds);
  out->set_total_seconds(s.total_seconds);
  if (!s.commit_map.empty()) out->set_commit_map(s.commit_map.data(), s.commit_map.size());
}

std::optional<v1::GenerateResponse> ToGenerateResponse(const GenerationEvent& event) {
  if (event.kind == GenerationEvent::Kind::kDone) return std::nullopt;
  v1::GenerateResponse response;
  response.set_request_id(event.request_id);
  if (event.kind == GenerationEvent::Kind::kRows) {
    auto* rows = response.mutable_rows();
    rows->set_first_row(static_cast<uint32_t>(event.first_row));
    rows->set_width(static_cast<uint32_t>(event.width));
    for (int32_t t : event.tokens) rows->add_tokens(static_cast<uint32_t>(t));
    if (!event.preview.empty()) rows->set_preview(event.preview);
    return response;
  }
  auto* image = response.mutable_image();
  image->set_data(event.image);
  image->set_format(event.format);
  image->set_width(static_cast<uint32_t>(event.image_width));
  image->set_height(static_cast<uint32_t>(event.image_height));
  for (int32_t t : event.tokens) image->add_tokens(static_cast<uint32_t>(t));
  FillStats(event.stats, event.queue_seconds, image->mutable_stats());
  image->mutable_stats()->set_method(event.method);
  image->mutable_stats()->set_method_choice(event.method_choice);
  return response;
}

void FillModelInfo(const ModelSummary& model, v1::ModelInfo* info) {
  info->set_name(model.name);
  info->set_image_width(static_cast<uint32_t>(model.image_width));
  info->set_image_height(static_cast<uint32_t>(model.image_height));
  info->set_grid_size(static_cast<uint32_t>(model.grid_size));
  info->set_vocab_size(static_cast<uint32_t>(model.vocab_size));
  for (const auto& m : model.methods) info->add_methods(m);
  info->mutable_default_sampling()->set_cfg_scale(model.default_cfg_scale);
  info->mutable_default_sampling()->set_temperature(model.default_temperature);
  info->mutable_default_sampling()->set_top_p(model.default_top_p);
  for (const auto& c : model.conditions) info->add_conditions(c);
  if (model.condition_width > 0) {
    info->set_condition_width(static_cast<uint32_t>(model.condition_width));
  }
  if (model.num_classes > 0) info->set_num_classes(static_cast<uint32_t>(model.num_classes));
  info->set_auto_method(model.auto_method);
  info->set_condition_rows(static_cast<uint32_t>(model.condition_rows));
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace mulo::server
