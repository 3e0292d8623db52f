#include "server/live_figures.h"

#include <algorithm>
#include <map>
#include <utility>

namespace mulo::server {
namespace {

double Seconds(LiveFigures::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

LiveFigures::LiveFigures(Clock::duration window, Clock::time_point started)
    : window_(std::max(window, Clock::duration(std::chrono::minutes(1)))), started_(started) {}

void LiveFigures::Record(Image image, Clock::time_point when) {
  absl::MutexLock lock(&mu_);
  finished_.push_back({when, std::move(image)});
  Prune(when);
}

void LiveFigures::Prune(Clock::time_point now) {
  while (!finished_.empty() &&
         (finished_.size() > kMaxImages || now - finished_.front().at > window_)) {
    finished_.pop_front();
  }
}

LiveFigures::Snapshot LiveFigures::Read(Clock::time_point now) const {
  const Clock::duration minute = std::chrono::minutes(1);
  const Clock::duration age = std::max(now - started_, Clock::duration(std::chrono::seconds(1)));
  Snapshot out;
  out.window_seconds = Seconds(std::min(window_, age));
  struct Sums {
    int64_t images = 0, tokens = 0, forwards = 0, accepted = 0, steps = 0;
  };
  std::map<std::string, Sums> by_method;
  int64_t last_minute = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const Finished& f : finished_) {
      if (f.at > now || now - f.at > window_) continue;
      if (now - f.at <= minute) ++last_minute;
      Sums& sums = by_method[f.image.method];
      ++sums.images;
      sums.tokens += f.image.tokens;
      sums.forwards += f.image.target_forwards;
      sums.accepted += f.image.accepted;
      sums.steps += f.image.verify_steps;
    }
  }
  out.images_per_second = static_cast<double>(last_minute) / Seconds(std::min(minute, age));
  for (const auto& [method, sums] : by_method) {
    Method m;
    m.method = method;
    m.images = sums.images;
    m.mean_accepted_length = sums.steps ? static_cast<double>(sums.accepted) / sums.steps : 0.0;
    m.step_compression = sums.forwards ? static_cast<double>(sums.tokens) / sums.forwards : 0.0;
    out.methods.push_back(std::move(m));
  }
  return out;
}

}  // namespace mulo::server
