// A next-token law written as a table, small enough to enumerate every image (issue 58): a
// vocabulary of a few tokens on a tiny grid, so that ar's exact joint law over all V^N images
// is a sum of products of table entries, and every method's sampled images can be tested
// against that whole joint, not only a few marginals.
//
// The law has two parts:
//   - the prefix table: the distribution of raster token j given tokens 0..j-1 (what ar, and
//     every lossless method, must follow); it is the part a power search tunes;
//   - the partial law: the distribution of raster token j given any other visible set of
//     earlier tokens (ZipAR's wavefront sees the row above only as far as it exists, and a
//     placeholder at a position whose token is not there). It is a fixed pseudo-random
//     function of the predicted position and the visible (position, token) pairs, so that a
//     wrong visible set changes the law.
#ifndef MULO_TESTS_ENGINE_DECODE_TABLE_LAW_H_
#define MULO_TESTS_ENGINE_DECODE_TABLE_LAW_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mulo::engine::testing {

// A raster position and the token seen there.
using Seen = std::pair<int64_t, int64_t>;

class TableLaw {
 public:
  // Every prefix distribution from Dirichlet(alpha) draws of a seeded generator (a small alpha
  // makes peaked rows); entries are kept at or above `floor` so that no token is impossible
  // (guidance would turn log 0 into NaN).
  static TableLaw Random(int64_t vocab, int64_t grid, uint64_t seed, double alpha = 0.4,
                         double floor = 1e-3);
  // The conditional table whose guidance with `unconditional` at scale `cfg` (softmax of
  // u + cfg (c - u) in log space) is `guided`, prefix row by prefix row: c proportional to
  // (guided u^(cfg - 1))^(1 / cfg). The partial law is guided's (a guided family is tested
  // on prefix contexts only).
  static TableLaw ConditionalFor(const TableLaw& guided, const TableLaw& unconditional, double cfg);

  int64_t vocab() const { return vocab_; }
  int64_t grid() const { return grid_; }
  int64_t tokens() const { return grid_ * grid_; }
  // How many images there are: vocab^tokens.
  int64_t images() const;

  // The distribution of token prefix.size() after `prefix` (shorter than tokens()).
  const std::vector<double>& Next(const std::vector<int64_t>& prefix) const;
  void SetNext(const std::vector<int64_t>& prefix, std::vector<double> probabilities);
  // The distribution of raster token `predicts` given the visible earlier tokens `seen`
  // (ascending positions, all < predicts). A prefix 0..predicts-1 gives Next; any other set
  // the partial law.
  std::vector<double> Given(int64_t predicts, const std::vector<Seen>& seen) const;

  // ar's exact law: the probability of every image, indexed by ImageIndex.
  std::vector<double> Joint() const;
  // Image <-> index: token j is digit j of the index in base vocab (token 0 least significant).
  int64_t ImageIndex(const std::vector<int64_t>& image) const;
  std::vector<int64_t> ImageAt(int64_t index) const;

  // Every prefix distribution, prefixes in order of length then ImageIndex-like code (the
  // form a power search writes and a fixture stores).
  const std::vector<std::vector<double>>& rows() const { return rows_; }
  void set_rows(std::vector<std::vector<double>> rows) { rows_ = std::move(rows); }
  // The row index of a prefix in rows().
  int64_t RowOf(const std::vector<int64_t>& prefix) const;
  // The prefix of row r.
  std::vector<int64_t> PrefixOfRow(int64_t r) const;

  // JSON: {"vocab", "grid", "partial_seed", "rows"}.
  std::string ToJson() const;
  static TableLaw FromJson(const std::string& text);

 private:
  TableLaw(int64_t vocab, int64_t grid, uint64_t partial_seed);

  int64_t vocab_, grid_;
  uint64_t partial_seed_;
  std::vector<std::vector<double>> rows_;
  std::vector<int64_t> offsets_;  // offsets_[L]: the first row of prefixes of length L
};

}  // namespace mulo::engine::testing

#endif  // MULO_TESTS_ENGINE_DECODE_TABLE_LAW_H_
