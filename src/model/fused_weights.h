// FusedWeights: owns weight matrices made at load time by stacking the rows of several matrices
// that are multiplied with the same activations (Q/K/V, gate/up), so one MatMul replaces several,
// and column ranges of matrices (tensor-parallel shards).
//
// Stacking only applies when every part has the same storage format and column count (a
// quantized row is self-contained, so rows copy as bytes). Used by the loading thread only; the
// matrices it hands out stay valid, read-only, for the lifetime of the FusedWeights.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include <string>

#include "common/status.h"
#include "kernels/matmul.h"

namespace radixserve::model {

class FusedWeights {
 public:
  // [parts[0].rows + parts[1].rows + ..., cols] holding the parts' rows in order, or nullopt when
  // the parts differ in format or columns (the caller then multiplies them one by one).
  std::optional<kernels::WeightMatrix> Stack(const std::vector<kernels::WeightMatrix>& parts);

  // Columns [first, first + n) of every row of `m` (a tensor-parallel shard of an output or down
  // projection), or nullopt when first or n is not a multiple of the format's block size.
  std::optional<kernels::WeightMatrix> Columns(const kernels::WeightMatrix& m, int64_t first,
                                               int64_t n);

  // Columns as above into `buffer` (replacing its contents; the matrix points into it), or
  // nullopt when they do not hold whole blocks.
  static std::optional<kernels::WeightMatrix> CopyColumns(const kernels::WeightMatrix& m,
                                                          int64_t first, int64_t n,
                                                          std::vector<uint8_t>& buffer);

  // Frees the copy `m` points into (a matrix Stack or Columns returned) once a packed form has
  // replaced it for every multiplication; `m` must not be read afterwards. False (and nothing
  // freed) for a matrix this object does not hold.
  bool Release(const kernels::WeightMatrix& m);

  // Bytes held by stacked copies.
  int64_t bytes() const { return bytes_; }

 private:
  std::deque<std::vector<uint8_t>> buffers_;
  int64_t bytes_ = 0;
};

// The error of a column shard of `n` columns of `m` (tensor `name`) that does not hold whole
// blocks, naming --tp-size and its `ranks`.
Status ColumnShardError(const kernels::WeightMatrix& m, int64_t n, const std::string& name,
                        int ranks);

}  // namespace radixserve::model
