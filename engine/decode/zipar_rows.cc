#include "engine/decode/zipar_rows.h"

#include <utility>

namespace mulo::engine {

ZipArRows::ZipArRows(int64_t grid, int64_t window, const std::vector<int64_t>& complete,
                     Visibility visible)
    : grid_(grid),
      window_(window),
      visible_(std::move(visible)),
      tokens_(grid * grid, -1),
      decoded_(grid, 0),
      fed_(grid, 0),
      open_(grid, false) {
  const int64_t rows = static_cast<int64_t>(complete.size()) / grid;
  for (int64_t i = 0; i < rows * grid; ++i) {
    tokens_[i] = complete[i];
    cached_.push_back(i);
  }
  for (int64_t r = 0; r < rows; ++r) {
    decoded_[r] = fed_[r] = grid;
    open_[r] = true;
  }
  if (rows < grid) open_[rows] = true;
}

void ZipArRows::Set(int64_t raster, int64_t token) {
  tokens_[raster] = token;
  ++decoded_[raster / grid_];
}

ZipArRows::Forward ZipArRows::Next(int64_t condition_rows, bool with_mask) {
  Forward forward;
  std::vector<Input> placeholders;
  for (int64_t r = 0; r < grid_; ++r) {
    if (!open_[r] || fed_[r] == decoded_[r]) continue;
    Input in;
    in.raster = r * grid_ + fed_[r];
    in.token = tokens_[in.raster];
    in.source = in.raster;
    if (in.raster + 1 == grid_ * grid_) continue;  // the image's last token feeds nothing
    const bool row_end = fed_[r] + 1 == grid_;
    if (!row_end) in.predicts = in.raster + 1;
    // Row r + 1 opens when row r has drawn enough tokens: from this token when it is row r's
    // last, otherwise from a placeholder at row r's last position.
    if (r + 1 < grid_ && !open_[r + 1] && decoded_[r] >= OpensNextRowAt(r)) {
      open_[r + 1] = true;
      if (row_end) {
        in.predicts = (r + 1) * grid_;
      } else {
        Input stand_in;
        stand_in.raster = r * grid_ + grid_ - 1;
        stand_in.source = (r - 1) * grid_ + decoded_[r - 1] - 1;
        stand_in.token = tokens_[stand_in.source];
        stand_in.placeholder = true;
        stand_in.predicts = (r + 1) * grid_;
        placeholders.push_back(stand_in);
      }
    }
    forward.inputs.push_back(in);
  }
  forward.placeholders = static_cast<int64_t>(placeholders.size());
  forward.inputs.insert(forward.inputs.end(), placeholders.begin(), placeholders.end());

  if (with_mask) forward.mask = Mask(forward, condition_rows);
  return forward;
}

torch::Tensor ZipArRows::Mask(const Forward& forward, int64_t condition_rows) const {
  const int64_t n = static_cast<int64_t>(forward.inputs.size());
  const int64_t cached = static_cast<int64_t>(cached_.size());
  auto mask = torch::zeros({n, condition_rows + cached + n}, torch::kBool);
  auto m = mask.accessor<bool, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t own = forward.inputs[i].raster;
    for (int64_t j = 0; j < condition_rows; ++j) m[i][j] = true;
    auto sees = [&](int64_t seen) { return seen < own && (!visible_ || visible_(own, seen)); };
    for (int64_t j = 0; j < cached; ++j) m[i][condition_rows + j] = sees(cached_[j]);
    for (int64_t k = 0; k < n; ++k) {
      const Input& other = forward.inputs[k];
      m[i][condition_rows + cached + k] = k == i || (!other.placeholder && sees(other.raster));
    }
  }
  return mask;
}

void ZipArRows::Fed(const Forward& forward) {
  for (const Input& in : forward.inputs) {
    if (in.placeholder) continue;
    cached_.push_back(in.raster);
    ++fed_[in.raster / grid_];
  }
}

std::vector<int64_t> ZipArRows::Unknown() const {
  std::vector<int64_t> unknown;
  for (int64_t r = 0; r < grid_; ++r) {
    for (int64_t c = 0; c < decoded_[r]; ++c) {
      if (tokens_[r * grid_ + c] < 0) unknown.push_back(r * grid_ + c);
    }
  }
  return unknown;
}

std::vector<bool> ZipArRows::RowsDone() const {
  std::vector<bool> done(grid_);
  for (int64_t r = 0; r < grid_; ++r) done[r] = decoded_[r] == grid_;
  return done;
}

}  // namespace mulo::engine
