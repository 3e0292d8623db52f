#include "server/http/image_store.h"

#include <cstdio>
#include <random>
#include <utility>

namespace mulo::server::http {
namespace {

// 128 random bits as hex, from the kernel's generator (std::random_device on Linux).
std::string RandomId() {
  static thread_local std::random_device device;
  std::string id;
  char hex[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(hex, sizeof hex, "%08x", device());
    id += hex;
  }
  return id;
}

}  // namespace

ImageStore::ImageStore(std::chrono::seconds ttl, size_t max_bytes)
    : ttl_(ttl), max_bytes_(max_bytes) {}

std::string ImageStore::Put(std::string bytes, std::string content_type, std::string owner) {
  if (bytes.size() > max_bytes_) return "";
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  DropExpiredLocked(now);
  while (bytes_ + bytes.size() > max_bytes_ && !order_.empty()) DropOldestLocked();
  std::string id = RandomId();
  bytes_ += bytes.size();
  images_[id] = Entry{Image{std::move(bytes), std::move(content_type), std::move(owner)}, now + ttl_};
  order_.push_back(id);
  return id;
}

std::optional<ImageStore::Image> ImageStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  DropExpiredLocked(Clock::now());
  auto it = images_.find(id);
  if (it == images_.end()) return std::nullopt;
  return it->second.image;
}

size_t ImageStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ImageStore::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return images_.size();
}

void ImageStore::DropExpiredLocked(Clock::time_point now) {
  // Every image lives the same TTL, so the oldest expire first.
  while (!order_.empty()) {
    auto it = images_.find(order_.front());
    if (it != images_.end() && it->second.expires > now) break;
    DropOldestLocked();
  }
}

void ImageStore::DropOldestLocked() {
  auto it = images_.find(order_.front());
  if (it != images_.end()) {
    bytes_ -= it->second.image.bytes.size();
    images_.erase(it);
  }
  order_.pop_front();
}

}  // namespace mulo::server::http
