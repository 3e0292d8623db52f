#include "server/http/hangup_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace mulo::server::http {

HangupWatcher::HangupWatcher() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    status_ = absl::InternalError(absl::StrCat("hangup watcher: ", std::strerror(errno)));
    return;
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = 0;  // ids start at 1: 0 is the wake-up
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  thread_ = std::thread([this] { Loop(); });
}

HangupWatcher::~HangupWatcher() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

uint64_t HangupWatcher::Watch(int fd, std::function<void()> on_hangup) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  watched_[id] = {fd, std::move(on_hangup)};
  epoll_event event{};
  // One-shot: a hung-up socket stays readable-for-hangup until closed; one report is enough.
  event.events = EPOLLRDHUP | EPOLLONESHOT;  // EPOLLHUP and EPOLLERR are always reported
  event.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) watched_.erase(id);
  return id;
}

void HangupWatcher::Unwatch(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = watched_.find(id);
  if (it != watched_.end()) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.first, nullptr);
    watched_.erase(it);
  }
  // The callback may have been taken out just before: wait until it has returned.
  callback_done_.wait(lock, [&] { return running_id_ != id; });
}

void HangupWatcher::Loop() {
  epoll_event events[64];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) return;  // stopping
      std::function<void()> callback;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = watched_.find(id);
        if (it == watched_.end()) continue;
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.first, nullptr);
        callback = std::move(it->second.second);
        watched_.erase(it);
        running_id_ = id;
      }
      callback();
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_id_ = 0;
      }
      callback_done_.notify_all();
    }
  }
}

}  // namespace mulo::server::http
