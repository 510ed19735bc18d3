// WeightStore: a checkpoint's tensors by canonical name (GGUF naming: "token_embd.weight",
// "blk.3.attn_q.weight", ...), whatever file format they came from. HF safetensors names are
// translated on the way in; dummy stores make seeded random tensors on first request.
//
// Owns the mapped files, so tensor data stays valid as long as the store lives. Not thread-safe:
// used by the loading thread only, then read-only through the pointers it handed out.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "kernels/weight_format.h"
#include "model/gguf_file.h"
#include "model/load_progress.h"
#include "model/safetensors_file.h"

namespace radixserve::model {

struct WeightTensor {
  std::string name;  // canonical
  std::string file;  // where it came from (error messages)
  kernels::WeightFormat format = kernels::WeightFormat::kF32;
  std::vector<int64_t> shape;  // outermost first
  const void* data = nullptr;
  int64_t bytes = 0;
};

class WeightStore {
 public:
  static Expected<std::unique_ptr<WeightStore>> FromGguf(GgufFile gguf);
  // model_type selects the HF naming scheme (Gemma 3 names its norms differently).
  static Expected<std::unique_ptr<WeightStore>> FromSafetensors(std::vector<SafetensorsFile> files,
                                                                const std::string& model_type);
  // Random weights: normal(0, 0.02) for matrices, 1 + small noise for norm vectors.
  static std::unique_ptr<WeightStore> Dummy(uint64_t seed, kernels::WeightFormat format);

  // Rotary layout the Q/K rows of this checkpoint were written for.
  kernels::RopeLayout rope_layout() const { return rope_layout_; }
  const std::string& description() const { return description_; }
  // How activations meet this checkpoint's quantized weights (set by the loader).
  kernels::ActivationMode activation_mode() const { return activation_mode_; }
  void set_activation_mode(kernels::ActivationMode mode) { activation_mode_ = mode; }
  // True for GGUF checkpoints (llama.cpp's converter bakes Gemma's "1 +" into norm weights).
  bool from_gguf() const { return gguf_ != nullptr; }

  const WeightTensor* Find(const std::string& name) const;
  // The tensor with exactly this shape, or an error naming the file and tensor.
  Expected<WeightTensor> Require(const std::string& name, const std::vector<int64_t>& shape);
  Expected<kernels::WeightMatrix> RequireMatrix(const std::string& name, int64_t rows,
                                                int64_t cols);
  // The `count` [rows, cols] matrices of a mixture-of-experts projection: slices of GGUF's
  // stacked 3-D tensor `<base>.weight` ([count, rows, cols], e.g. "blk.0.ffn_up_exps.weight"),
  // or else one matrix per expert named `<base>.<e>.weight` (HF checkpoints). Both follow
  // set_matrix_storage like any matrix (a stacked tensor is converted whole, and counts as
  // `count` matrices in converted_matrices / kept_quantized_matrices).
  Expected<std::vector<kernels::WeightMatrix>> RequireExperts(const std::string& base,
                                                              int64_t count, int64_t rows,
                                                              int64_t cols);
  // A 1-D tensor converted to float32 (norm weights, biases).
  Expected<std::vector<float>> RequireVector(const std::string& name, int64_t size);

  // Drops the resident pages of m's bytes in the checkpoint's mapping, once a packed copy has
  // replaced them for the matrix multiplications (MappedFile::DropPages: a later read of m, e.g.
  // an embedding row, faults its pages back in). Returns the bytes dropped (0 for converted or
  // read-in matrices).
  uint64_t DropSourcePages(const kernels::WeightMatrix& m) const;

  // Reports each newly required tensor to `progress` (may be null; not owned).
  void set_progress(LoadProgress* progress) { progress_ = progress; }
  // Tensors available (0 for dummy stores, which make them on request).
  int64_t tensor_count() const { return dummy_ ? 0 : static_cast<int64_t>(tensors_.size()); }

  // Bytes of all tensors handed out by Require (the model's weight footprint), counting
  // converted matrices at their converted size.
  int64_t used_bytes() const { return used_bytes_; }
  // Bytes of every tensor the checkpoint holds, as stored (0 for dummy stores).
  int64_t stored_bytes() const {
    int64_t total = 0;
    for (const auto& [name, t] : tensors_) total += t.bytes;
    return dummy_ ? 0 : total;
  }

  // --dtype for checkpoint weights: when set, RequireMatrix converts F32/F16/BF16 matrices stored
  // in another float format to `format` (nearest even) into memory the store owns; 1-D tensors
  // (norms, biases) and block-quantized matrices are never converted. Set before the first
  // RequireMatrix.
  void set_matrix_storage(std::optional<kernels::WeightFormat> format) { matrix_storage_ = format; }
  // Matrices converted, and block-quantized matrices left as they are, under set_matrix_storage.
  int64_t converted_matrices() const { return converted_count_; }
  int64_t kept_quantized_matrices() const { return kept_quantized_; }

 private:
  WeightStore() = default;
  void Add(WeightTensor tensor);
  // Tensor `t` (already Required) as a [rows, cols] matrix, converted under set_matrix_storage.
  Expected<kernels::WeightMatrix> StoredMatrix(const std::string& name, const WeightTensor& t,
                                               int64_t rows, int64_t cols);

  std::string description_;
  kernels::RopeLayout rope_layout_ = kernels::RopeLayout::kRotateHalf;
  kernels::ActivationMode activation_mode_ = kernels::ActivationMode::kExact;
  std::unique_ptr<GgufFile> gguf_;
  std::vector<SafetensorsFile> safetensors_;
  std::map<std::string, WeightTensor> tensors_;
  bool dummy_ = false;
  kernels::WeightFormat dummy_format_ = kernels::WeightFormat::kF32;
  std::mt19937_64 rng_;
  std::deque<std::vector<uint8_t>> owned_;
  std::map<std::string, bool> counted_;
  std::optional<kernels::WeightFormat> matrix_storage_;
  std::map<std::string, kernels::WeightMatrix> converted_;
  std::map<std::string, bool> counted_quantized_;
  int64_t kept_quantized_ = 0;
  int64_t converted_count_ = 0;
  int64_t used_bytes_ = 0;
  LoadProgress* progress_ = nullptr;
};

// HF parameter name to canonical name; empty when the name is not a model weight we use.
std::string CanonicalWeightName(const std::string& hf_name, const std::string& model_type);

}  // namespace radixserve::model
