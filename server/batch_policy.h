// Which methods' requests join their worker's batches (--batch_methods, default all). Batching
// keeps every method's tokens exact, so this is a speed choice only; a request of a method
// left out gets its worker alone (Job::joins_batches), as with batching off.
#ifndef MULO_SERVER_BATCH_POLICY_H_
#define MULO_SERVER_BATCH_POLICY_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mulo::server {

class BatchPolicy {
 public:
  // Every method batches.
  static BatchPolicy All();
  // "all", "none" or a comma list of the method registry's names ("ar,mulo");
  // INVALID_ARGUMENT naming --batch_methods and the unknown name otherwise.
  static absl::StatusOr<BatchPolicy> Parse(absl::string_view text);

  bool Batches(absl::string_view method) const;
  // "all", "none" or the names in registry order (for the start-up log).
  std::string ToString() const;

 private:
  bool all_ = false;
  std::set<std::string, std::less<>> methods_;
};

}  // namespace mulo::server

#endif  // MULO_SERVER_BATCH_POLICY_H_
