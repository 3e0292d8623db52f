// Nearest-rank percentile of a sample, for the client's and the soak bench's latency tables.
#ifndef MULO_CLIENT_PERCENTILE_H_
#define MULO_CLIENT_PERCENTILE_H_

#include <algorithm>
#include <vector>

namespace mulo::client {

// q in [0, 1]; 0 for an empty sample.
inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace mulo::client

#endif  // MULO_CLIENT_PERCENTILE_H_
