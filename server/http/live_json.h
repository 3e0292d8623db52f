// GET /v1/live's body: the live figures (server/live_figures.h) as JSON, for the playground's
// panel and for any dashboard that would rather not speak PromQL.
#ifndef MULO_SERVER_HTTP_LIVE_JSON_H_
#define MULO_SERVER_HTTP_LIVE_JSON_H_

#include <string>

#include "server/live_figures.h"

namespace mulo::server::http {

// {"object": "mulo.live", "running", "queued", "images_per_second", "window_seconds",
//  "methods": [{"method", "images", "mean_accepted_length", "step_compression"}]}
std::string LiveJson(const LiveFigures::Snapshot& live);

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_LIVE_JSON_H_
