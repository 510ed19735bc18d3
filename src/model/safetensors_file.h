// SafetensorsFile: a parsed .safetensors file (8-byte little-endian header length, a JSON header,
// then raw tensor bytes). The header is validated in full before any tensor is used: JSON shape,
// known dtypes (F32, F16, BF16 load; tensors of the other valid safetensors dtypes, such as the
// I64 `position_ids` buffer BERT checkpoints carry, are validated and listed in other_dtypes()
// but not loadable), shapes
// (non-negative, no overflow), data_offsets in bounds, consistent with shape x dtype, and not
// overlapping. Errors name the file and tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/weight_format.h"
#include "model/mapped_file.h"

namespace radixserve::model {

struct SafetensorsTensor {
  std::string name;
  kernels::WeightFormat format = kernels::WeightFormat::kF32;
  std::vector<int64_t> shape;  // outermost first
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> Open(const std::string& path, bool use_mmap);
  static Expected<SafetensorsFile> Parse(MappedFile file);

  const std::string& path() const { return file_.path(); }
  const MappedFile& file() const { return file_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsTensor* Find(const std::string& name) const;
  // Valid tensors in dtypes radixserve does not load (name -> safetensors dtype, e.g. "I64").
  const std::map<std::string, std::string>& other_dtypes() const { return other_dtypes_; }
  // The bytes of such a tensor (its `format` field means nothing), for readers that know its
  // layout (gpt-oss's U8 MXFP4 blocks and scales); null when absent or of a loadable dtype.
  const SafetensorsTensor* FindOther(const std::string& name) const;

 private:
  SafetensorsFile(MappedFile file) : file_(std::move(file)) {}
  Status ParseAll();

  MappedFile file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::string> other_dtypes_;
  std::map<std::string, SafetensorsTensor> others_;
};

}  // namespace radixserve::model
