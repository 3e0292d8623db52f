// Tells when the peer of a socket hangs up, without polling: one thread waits in epoll on
// every watched socket for EPOLLRDHUP / EPOLLHUP / EPOLLERR only (never its input), and calls
// the socket's callback once. The HTTP front end watches a connection while its request
// generates, so a client that disconnects cancels its generation within one decoding step.
#ifndef MULO_SERVER_HTTP_HANGUP_WATCHER_H_
#define MULO_SERVER_HTTP_HANGUP_WATCHER_H_

#include <cstdint>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "absl/status/status.h"

namespace mulo::server::http {

class HangupWatcher {
 public:
  HangupWatcher();
  ~HangupWatcher();
  HangupWatcher(const HangupWatcher&) = delete;
  HangupWatcher& operator=(const HangupWatcher&) = delete;

  absl::Status status() const { return status_; }  // the epoll set could not be made

  // Calls `on_hangup` (on the watcher's thread) when the peer of `fd` hangs up; returns an id
  // for Unwatch. The caller must Unwatch before `fd` is closed.
  uint64_t Watch(int fd, std::function<void()> on_hangup);
  // After it returns, the callback is not running and will not run.
  void Unwatch(uint64_t id);

 private:
  void Loop();

  absl::Status status_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd that stops the loop
  std::mutex mu_;
  std::map<uint64_t, std::pair<int, std::function<void()>>> watched_;
  uint64_t next_id_ = 1;
  uint64_t running_id_ = 0;  // whose callback runs now (0: none)
  std::condition_variable callback_done_;
  std::thread thread_;
};

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_HANGUP_WATCHER_H_
