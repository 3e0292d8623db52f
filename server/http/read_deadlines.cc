#include "server/http/read_deadlines.h"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

namespace mulo::server::http {

ReadDeadlines::ReadDeadlines(std::chrono::milliseconds deadline)
    : deadline_(deadline), thread_([this] { Loop(); }) {}

ReadDeadlines::~ReadDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void ReadDeadlines::Opened(const void* connection, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_[connection] = Tracked{fd, true, Clock::now()};
}

void ReadDeadlines::RequestRead(const void* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(connection);
  if (it != connections_.end()) it->second.reading = false;
}

void ReadDeadlines::Answered(const void* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(connection);
  if (it != connections_.end()) it->second = Tracked{it->second.fd, true, Clock::now()};
}

void ReadDeadlines::Closed(const void* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.erase(connection);
}

int64_t ReadDeadlines::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

void ReadDeadlines::Loop() {
  // A tenth of the deadline (at least 50 ms, at most 1 s) between sweeps.
  const auto period = std::clamp<std::chrono::milliseconds>(
      deadline_ / 10, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, period, [this] { return stop_; });
    if (stop_ || deadline_.count() == 0) continue;
    const Clock::time_point now = Clock::now();
    for (auto& [connection, tracked] : connections_) {
      if (!tracked.reading || tracked.fd < 0 || now - tracked.since < deadline_) continue;
      // The library still owns the socket (Closed has not run): shutting it down makes its
      // next read fail, and the library closes the connection.
      shutdown(tracked.fd, SHUT_RDWR);
      tracked.fd = -1;
      ++expired_;
    }
  }
}

}  // namespace mulo::server::http
