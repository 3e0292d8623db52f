#include "tests/engine/decode/table_law.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace mulo::engine::testing {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

TableLaw::TableLaw(int64_t vocab, int64_t grid, uint64_t partial_seed)
    : vocab_(vocab), grid_(grid), partial_seed_(partial_seed) {
  if (vocab < 2 || grid < 1 || grid > 3) throw std::invalid_argument("TableLaw: bad shape");
  int64_t offset = 0, count = 1;
  for (int64_t length = 0; length < tokens(); ++length) {
    offsets_.push_back(offset);
    offset += count;
    count *= vocab;
  }
  rows_.assign(offset, std::vector<double>(vocab, 1.0 / static_cast<double>(vocab)));
}

TableLaw TableLaw::Random(int64_t vocab, int64_t grid, uint64_t seed, double alpha, double floor) {
  TableLaw law(vocab, grid, SplitMix(seed ^ 0x5eedULL));
  std::mt19937_64 gen(seed);
  std::gamma_distribution<double> gamma(alpha, 1.0);
  for (auto& row : law.rows_) {
    double total = 0;
    for (double& p : row) total += (p = gamma(gen));
    double kept = 0;
    for (double& p : row) kept += (p = std::max(p / total, floor));
    for (double& p : row) p /= kept;
  }
  return law;
}

TableLaw TableLaw::ConditionalFor(const TableLaw& guided, const TableLaw& unconditional,
                                  double cfg) {
  TableLaw c = guided;
  for (size_t r = 0; r < c.rows_.size(); ++r) {
    double total = 0;
    for (int64_t t = 0; t < c.vocab_; ++t) {
      const double log_c =
          (std::log(guided.rows_[r][t]) + (cfg - 1) * std::log(unconditional.rows_[r][t])) / cfg;
      total += (c.rows_[r][t] = std::exp(log_c));
    }
    for (double& p : c.rows_[r]) p /= total;
  }
  return c;
}

int64_t TableLaw::images() const {
  int64_t n = 1;
  for (int64_t j = 0; j < tokens(); ++j) n *= vocab_;
  return n;
}

int64_t TableLaw::RowOf(const std::vector<int64_t>& prefix) const {
  const int64_t length = static_cast<int64_t>(prefix.size());
  if (length >= tokens()) throw std::out_of_range("TableLaw: prefix as long as the image");
  int64_t code = 0, scale = 1;
  for (int64_t t : prefix) {
    if (t < 0 || t >= vocab_) throw std::out_of_range("TableLaw: token outside the vocabulary");
    code += t * scale;
    scale *= vocab_;
  }
  return offsets_[length] + code;
}

std::vector<int64_t> TableLaw::PrefixOfRow(int64_t r) const {
  int64_t length = 0;
  while (length + 1 < tokens() && offsets_[length + 1] <= r) ++length;
  std::vector<int64_t> prefix;
  int64_t code = r - offsets_[length];
  for (int64_t j = 0; j < length; ++j) {
    prefix.push_back(code % vocab_);
    code /= vocab_;
  }
  return prefix;
}

const std::vector<double>& TableLaw::Next(const std::vector<int64_t>& prefix) const {
  return rows_[RowOf(prefix)];
}

void TableLaw::SetNext(const std::vector<int64_t>& prefix, std::vector<double> probabilities) {
  rows_[RowOf(prefix)] = std::move(probabilities);
}

std::vector<double> TableLaw::Given(int64_t predicts, const std::vector<Seen>& seen) const {
  bool prefix = static_cast<int64_t>(seen.size()) == predicts;
  for (size_t i = 0; prefix && i < seen.size(); ++i) prefix = seen[i].first == int64_t(i);
  if (prefix) {
    std::vector<int64_t> tokens;
    for (const Seen& s : seen) tokens.push_back(s.second);
    return Next(tokens);
  }
  // A peaked pseudo-random row that depends on every visible pair.
  uint64_t h = SplitMix(partial_seed_ ^ static_cast<uint64_t>(predicts));
  for (const Seen& s : seen) {
    h = SplitMix(h ^ (static_cast<uint64_t>(s.first) * 131 + static_cast<uint64_t>(s.second)));
  }
  std::vector<double> row(vocab_);
  double total = 0;
  for (int64_t k = 0; k < vocab_; ++k) {
    h = SplitMix(h);
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    total += (row[k] = 0.02 + u * u * u);
  }
  for (double& p : row) p /= total;
  return row;
}

int64_t TableLaw::ImageIndex(const std::vector<int64_t>& image) const {
  int64_t index = 0, scale = 1;
  for (int64_t t : image) {
    index += t * scale;
    scale *= vocab_;
  }
  return index;
}

std::vector<int64_t> TableLaw::ImageAt(int64_t index) const {
  std::vector<int64_t> image(tokens());
  for (int64_t j = 0; j < tokens(); ++j) {
    image[j] = index % vocab_;
    index /= vocab_;
  }
  return image;
}

std::vector<double> TableLaw::Joint() const {
  std::vector<double> joint(images());
  for (int64_t i = 0; i < images(); ++i) {
    const std::vector<int64_t> image = ImageAt(i);
    double p = 1;
    std::vector<int64_t> prefix;
    for (int64_t t : image) {
      p *= Next(prefix)[t];
      prefix.push_back(t);
    }
    joint[i] = p;
  }
  return joint;
}

std::string TableLaw::ToJson() const {
  nlohmann::json doc = {
      {"vocab", vocab_}, {"grid", grid_}, {"partial_seed", partial_seed_}, {"rows", rows_}};
  return doc.dump();
}

TableLaw TableLaw::FromJson(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text);
  TableLaw law(doc.at("vocab").get<int64_t>(), doc.at("grid").get<int64_t>(),
               doc.at("partial_seed").get<uint64_t>());
  auto rows = doc.at("rows").get<std::vector<std::vector<double>>>();
  if (rows.size() != law.rows_.size()) throw std::invalid_argument("TableLaw: row count");
  for (const auto& row : rows) {
    if (static_cast<int64_t>(row.size()) != law.vocab_) {
      throw std::invalid_argument("TableLaw: row width");
    }
  }
  law.rows_ = std::move(rows);
  return law;
}

}  // namespace mulo::engine::testing
