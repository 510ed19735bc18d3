// GgufFile: a parsed GGUF v2/v3 file (llama.cpp's checkpoint format): metadata key/values and
// tensor infos, with tensor data left in the mapped file.
//
// Parsing validates everything before any tensor byte is touched: every read is bounds-checked,
// string and array lengths are checked against the bytes left, tensor shapes against overflow,
// data offsets against alignment, the file end and each other (no overlap). Errors are DataLoss
// (malformed / truncated) or Unsupported (a valid file using a type we cannot load) and name the
// file and, where there is one, the key or tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/weight_format.h"
#include "model/mapped_file.h"

namespace radixserve::model {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value. Integers of any width land in `integer` (uint64 values above INT64_MAX are
// rejected), floats in `real`. An array keeps its element type and length only: its elements are
// validated while parsing and then dropped, since the file stays open for the server's lifetime
// and the large arrays are the tokenizer's (262,144 tokens, scores and types of Gemma 3 took
// 69 MB as values), which the tokenizer reads for itself (tokenizer/gguf_metadata.h).
struct GgufValue {
  GgufType type = GgufType::kUint8;
  int64_t integer = 0;
  double real = 0.0;
  std::string string;
  GgufType elem_type = GgufType::kUint8;
  uint64_t array_length = 0;

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // outermost first (GGUF stores innermost first; reversed here)
  uint32_t ggml_type = 0;
  kernels::WeightFormat format = kernels::WeightFormat::kF32;
  uint64_t offset = 0;  // from the start of the data section
  int64_t bytes = 0;
  const uint8_t* data = nullptr;
};

class GgufFile {
 public:
  static Expected<GgufFile> Open(const std::string& path, bool use_mmap);
  static Expected<GgufFile> Parse(MappedFile file);

  uint32_t version() const { return version_; }
  const std::string& path() const { return file_.path(); }
  const MappedFile& file() const { return file_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed lookups: nullopt when the key is absent; an error when present with the wrong type.
  Expected<std::optional<int64_t>> GetInt(const std::string& key) const;
  Expected<std::optional<double>> GetFloat(const std::string& key) const;  // ints accepted
  Expected<std::optional<std::string>> GetString(const std::string& key) const;

 private:
  GgufFile(MappedFile file) : file_(std::move(file)) {}
  Status ParseAll();

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace radixserve::model
