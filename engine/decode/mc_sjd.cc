#include "engine/decode/mc_sjd.h"

#include <typeinfo>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/sampling/maximal_coupling.h"
#include "engine/sampling/row_sampler.h"

namespace mulo::engine {
namespace {

SjdOptions JacobiOf(const McSjdOptions& o) {
  SjdOptions jacobi;
  jacobi.window = o.window;
  jacobi.init = o.init;
  jacobi.accept = o.accept;
  return jacobi;
}

}  // namespace

McSjdDecoder::McSjdDecoder(McSjdOptions options)
    : SjdDecoder(JacobiOf(options)), mc_(std::move(options)) {}

Status McSjdDecoder::Validate(const ModelSet& models) const {
  if (!(mc_.coupling >= 0.0 && mc_.coupling <= 1.0)) {
    return InvalidArgumentError(name() + ".coupling: must be in [0, 1]");
  }
  return SjdDecoder::Validate(models);
}

torch::Tensor McSjdDecoder::RedrawOnDevice(DecodeSession& session, const torch::Tensor& p,
                                           int64_t first, const std::vector<int64_t>& carried,
                                           const std::vector<torch::Tensor>& carried_q) const {
  const int64_t rows = p.size(0) - first;
  const int64_t coupled = static_cast<int64_t>(carried.size());
  // Greedy p is one-hot: the coupling keeps x exactly when it is p's argmax, and the residual
  // is p, so every row is p's argmax, as SJD's. Coupling 0 draws as SJD does.
  if (rows <= 0 || coupled == 0 || session.greedy() || mc_.coupling == 0.0) {
    return SjdDecoder::RedrawOnDevice(session, p, first, carried, carried_q);
  }
  const torch::Tensor tail = p.narrow(0, first, rows);
  const torch::Tensor p_carried = tail.narrow(0, 0, coupled);
  const torch::Tensor q = torch::stack(carried_q);
  const torch::Tensor x = Upload(torch::tensor(carried, torch::kInt64), p.device());
  // The drafter stream's numbers as SJD takes them, one per row; the coupling's keep tests
  // (and, below 1, its coin per row) from the acceptance stream.
  const torch::Tensor draw_numbers = session.uniforms(RngStream::kDrafter).Take(rows);
  const torch::Tensor keep_numbers = session.uniforms(RngStream::kAcceptance).Take(coupled);
  const torch::Tensor keep_probability =
      mc_.coupled_keep ? mc_.coupled_keep(p_carried, q, x) : KeepProbabilities(p_carried, q, x);
  // Below 1, a coin per row (acceptance stream) says whether it is coupled.
  const torch::Tensor coupled_rows =
      mc_.coupling < 1.0 ? session.uniforms(RngStream::kAcceptance).Take(coupled) < mc_.coupling
                         : torch::Tensor();
  const CoupledDraws carried_next = CoupleRows(
      p_carried, x, keep_probability,
      mc_.coupled_residual ? mc_.coupled_residual(p_carried, q) : ResidualRows(p_carried, q),
      keep_numbers, draw_numbers.narrow(0, 0, coupled), coupled_rows);
  // Rows past the carried drafts (the bonus row) had no draft: drawn from p as SJD's.
  return rows == coupled
             ? carried_next.tokens
             : torch::cat({carried_next.tokens,
                           DrawRows(tail.narrow(0, coupled, rows - coupled),
                                    draw_numbers.narrow(0, coupled, rows - coupled))});
}

std::optional<SjdDecoder::GraphRules> McSjdDecoder::RulesInGraphs() const {
  if (typeid(*this) != typeid(McSjdDecoder) || mc_.coupling != 1.0 || mc_.accept ||
      mc_.coupled_keep || mc_.coupled_residual || mc_.carried_q) {
    return std::nullopt;
  }
  return GraphRules{std::nullopt, /*couple=*/true};
}

std::vector<torch::Tensor> McSjdDecoder::NextQ(const torch::Tensor& p, int64_t first,
                                               const std::vector<int64_t>& drafts,
                                               const std::vector<int64_t>& carried,
                                               const std::vector<torch::Tensor>& carried_q) const {
  std::vector<torch::Tensor> q = SjdDecoder::NextQ(p, first, drafts, carried, carried_q);
  if (!mc_.carried_q) return q;
  // A carried draft the coupling kept is the old token: the coupling's residual has no mass
  // there, so the token is unchanged exactly when it was kept.
  for (size_t i = 0; i < carried.size() && i < q.size(); ++i) {
    q[i] = mc_.carried_q(q[i], carried_q[i], drafts[i] == carried[i]);
  }
  return q;
}

}  // namespace mulo::engine
