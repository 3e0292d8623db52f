#include "engine/sampling/chain_judge.h"

#include <map>
#include <string>
#include <utility>

#include "engine/core/host_read.h"

namespace mulo::engine {

std::vector<ChainDecision> JudgeChainsTogether(const std::vector<ChainCall>& calls) {
  // Batches by (device, vocabulary), each call's index kept.
  std::map<std::pair<std::string, int64_t>, std::vector<size_t>> batches;
  for (size_t i = 0; i < calls.size(); ++i) {
    batches[{calls[i].p.device().str(), calls[i].p.size(1)}].push_back(i);
  }
  std::vector<ChainDecision> decisions(calls.size());
  for (const auto& [key, members] : batches) {
    std::vector<ChainCall> batch;
    batch.reserve(members.size());
    for (size_t i : members) batch.push_back(calls[i]);
    const torch::Tensor rows = HostRead(JudgeChains(batch), torch::kInt64).contiguous();
    const int64_t* values = rows.data_ptr<int64_t>();
    const int64_t columns = rows.size(1);
    for (size_t j = 0; j < members.size(); ++j) {
      const int64_t* row = values + columns * static_cast<int64_t>(j);
      ChainDecision& decision = decisions[members[j]];
      decision.kept = row[0];
      decision.next_token = row[1];
      decision.neighbors = row[3];
      for (int64_t i = 4; i < columns; ++i) {
        if (row[i] != 0) decision.relaxed.push_back(i - 4);
      }
    }
  }
  return decisions;
}

}  // namespace mulo::engine
