// A deadline for reading a whole request (headers and body), apart from the idle timeout: a
// client that drips one byte every few seconds resets any idle timer, so without it one
// connection could hold a request open for ever. Every connection is tracked from the moment it
// opens, or its previous request was answered, until its request has been read in full; one
// that takes longer than the deadline is shut down (shutdown(2) on its socket, which the HTTP
// library then sees as a broken connection and closes). Requests being handled (waiting for a
// generation, streaming) are not timed here.
#ifndef MULO_SERVER_HTTP_READ_DEADLINES_H_
#define MULO_SERVER_HTTP_READ_DEADLINES_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace mulo::server::http {

class ReadDeadlines {
 public:
  using Clock = std::chrono::steady_clock;

  // `deadline` zero: nothing is ever shut down (the tracking still runs).
  explicit ReadDeadlines(std::chrono::milliseconds deadline);
  ~ReadDeadlines();
  ReadDeadlines(const ReadDeadlines&) = delete;
  ReadDeadlines& operator=(const ReadDeadlines&) = delete;

  // A connection opened on socket `fd` (its key is any pointer unique while it is open).
  void Opened(const void* connection, int fd);
  // Its request has been read in full: no deadline while it is handled.
  void RequestRead(const void* connection);
  // Its request was answered: the next one must arrive within the deadline from now.
  void Answered(const void* connection);
  // It closed (the socket is about to be closed: never touched again).
  void Closed(const void* connection);

  // Connections shut down for their deadline so far.
  int64_t expired() const;

 private:
  struct Tracked {
    int fd = -1;
    bool reading = true;
    Clock::time_point since;
  };
  void Loop();

  const std::chrono::milliseconds deadline_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::map<const void*, Tracked> connections_;
  int64_t expired_ = 0;
  std::thread thread_;
};

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_READ_DEADLINES_H_
