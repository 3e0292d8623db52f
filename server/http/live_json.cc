#include "server/http/live_json.h"

#include <nlohmann/json.hpp>

namespace mulo::server::http {

std::string LiveJson(const LiveFigures::Snapshot& live) {
  nlohmann::json methods = nlohmann::json::array();
  for (const LiveFigures::Method& m : live.methods) {
    methods.push_back({{"method", m.method},
                       {"images", m.images},
                       {"mean_accepted_length", m.mean_accepted_length},
                       {"step_compression", m.step_compression}});
  }
  return nlohmann::json{{"object", "mulo.live"},
                        {"running", live.running},
                        {"queued", live.queued},
                        {"images_per_second", live.images_per_second},
                        {"window_seconds", live.window_seconds},
                        {"methods", methods}}
      .dump();
}

}  // namespace mulo::server::http
