// Images kept for `response_format: "url"` (OpenAI's Images API): each finished image is kept
// under a random 128-bit id for a bounded time (the TTL) within a bounded memory budget, the
// oldest dropped first when a new one does not fit, and served at /v1/images/files/<id>.<ext>.
// Each image remembers the Authorization its request carried (its owner), so that with API
// keys on its URL works as a signed link does (OpenAI's own image URLs need no key, and
// clients such as LibreChat fetch them without one) only while the key that made it is valid:
// revoking the key revokes its URLs.
#ifndef MULO_SERVER_HTTP_IMAGE_STORE_H_
#define MULO_SERVER_HTTP_IMAGE_STORE_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace mulo::server::http {

class ImageStore {
 public:
  using Clock = std::chrono::steady_clock;

  struct Image {
    std::string bytes;
    std::string content_type;
    std::string owner;  // the Authorization header of the request that made it ("" if none)
  };

  ImageStore(std::chrono::seconds ttl, size_t max_bytes);

  // Keeps the image; returns its id (32 lowercase hex digits). An image larger than the whole
  // budget is not kept (returns "").
  std::string Put(std::string bytes, std::string content_type, std::string owner = "");
  // The image, or none when the id is unknown, expired or evicted.
  std::optional<Image> Get(const std::string& id);

  size_t bytes() const;
  size_t count() const;
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  struct Entry {
    Image image;
    Clock::time_point expires;
  };
  void DropExpiredLocked(Clock::time_point now);
  void DropOldestLocked();

  const std::chrono::seconds ttl_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> images_;
  std::deque<std::string> order_;  // ids, oldest first
  size_t bytes_ = 0;
};

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_IMAGE_STORE_H_
