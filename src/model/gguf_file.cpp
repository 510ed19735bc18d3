#include "model/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace radixserve::model {
namespace {

constexpr int kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;  // nested arrays deeper than this are rejected

// Bounds-checked little-endian cursor over the file bytes.
class Reader {
 public:
  Reader(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status Fail(const std::string& what) const {
    return DataLoss(path_ + ": malformed GGUF at byte " + std::to_string(pos_) + ": " + what);
  }

  template <typename T>
  Status Read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return Fail(std::string("truncated while reading ") + what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, const char* what) {
    uint64_t len = 0;
    RADIX_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return Fail(std::string(what) + " length " + std::to_string(len) + " exceeds the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

// Smallest encoded size of one value of `type` (to bound array lengths before allocating).
uint64_t MinEncodedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kString:
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

Status ReadValue(Reader& r, GgufType type, GgufValue* out, const std::string& key, int depth) {
  out->type = type;
  switch (type) {
    case GgufType::kUint8: {
      uint8_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "u8"));
      out->integer = v;
      break;
    }
    case GgufType::kInt8: {
      int8_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "i8"));
      out->integer = v;
      break;
    }
    case GgufType::kUint16: {
      uint16_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "u16"));
      out->integer = v;
      break;
    }
    case GgufType::kInt16: {
      int16_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "i16"));
      out->integer = v;
      break;
    }
    case GgufType::kUint32: {
      uint32_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "u32"));
      out->integer = v;
      break;
    }
    case GgufType::kInt32: {
      int32_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "i32"));
      out->integer = v;
      break;
    }
    case GgufType::kInt64: {
      int64_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "i64"));
      out->integer = v;
      break;
    }
    case GgufType::kUint64: {
      uint64_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "u64"));
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return r.Fail("value of " + key + " is out of range");
      }
      out->integer = static_cast<int64_t>(v);
      break;
    }
    case GgufType::kFloat32: {
      float v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "f32"));
      out->real = v;
      break;
    }
    case GgufType::kFloat64: {
      double v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "f64"));
      out->real = v;
      break;
    }
    case GgufType::kBool: {
      uint8_t v = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&v, "bool"));
      if (v > 1) return r.Fail("bool value of " + key + " is neither 0 nor 1");
      out->integer = v;
      break;
    }
    case GgufType::kString:
      RADIX_RETURN_IF_ERROR(r.ReadString(&out->string, "string value"));
      break;
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) return r.Fail("arrays nested too deeply in " + key);
      uint32_t elem = 0;
      uint64_t count = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&elem, "array type"));
      if (!KnownType(elem))
        return r.Fail("unknown array element type " + std::to_string(elem) + " in " + key);
      RADIX_RETURN_IF_ERROR(r.Read(&count, "array length"));
      out->elem_type = static_cast<GgufType>(elem);
      if (count > r.remaining() / MinEncodedSize(out->elem_type)) {
        return r.Fail("array " + key + " of " + std::to_string(count) +
                      " elements exceeds the file");
      }
      out->array_length = count;
      GgufValue element;  // each element is read (so checked) into this one and dropped
      for (uint64_t i = 0; i < count; ++i) {
        RADIX_RETURN_IF_ERROR(ReadValue(r, out->elem_type, &element, key, depth + 1));
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

Expected<GgufFile> GgufFile::Open(const std::string& path, bool use_mmap) {
  RADIX_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path, use_mmap));
  return Parse(std::move(file));
}

Expected<GgufFile> GgufFile::Parse(MappedFile file) {
  GgufFile gguf(std::move(file));
  RADIX_RETURN_IF_ERROR(gguf.ParseAll());
  return gguf;
}

Status GgufFile::ParseAll() {
  const std::string& path = file_.path();
  Reader r(file_.data(), file_.size(), path);
  uint32_t magic = 0;
  RADIX_RETURN_IF_ERROR(r.Read(&magic, "magic"));
  if (std::memcmp(&magic, "GGUF", 4) != 0) return DataLoss(path + ": not a GGUF file (bad magic)");
  RADIX_RETURN_IF_ERROR(r.Read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return Unsupported(path + ": GGUF version " + std::to_string(version_) +
                       " is not supported (only 2 and 3)");
  }
  uint64_t tensor_count = 0, kv_count = 0;
  RADIX_RETURN_IF_ERROR(r.Read(&tensor_count, "tensor count"));
  RADIX_RETURN_IF_ERROR(r.Read(&kv_count, "metadata count"));
  // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info 8+4+8+4+8.
  if (kv_count > r.remaining() / 13)
    return r.Fail("metadata count " + std::to_string(kv_count) + " exceeds the file");
  if (tensor_count > r.remaining() / 32)
    return r.Fail("tensor count " + std::to_string(tensor_count) + " exceeds the file");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    RADIX_RETURN_IF_ERROR(r.ReadString(&key, "metadata key"));
    uint32_t type = 0;
    RADIX_RETURN_IF_ERROR(r.Read(&type, "metadata type"));
    if (!KnownType(type)) return r.Fail("unknown type " + std::to_string(type) + " of key " + key);
    GgufValue value;
    RADIX_RETURN_IF_ERROR(ReadValue(r, static_cast<GgufType>(type), &value, key, 0));
    if (!metadata_.emplace(key, std::move(value)).second) return r.Fail("duplicate key " + key);
  }
  if (const GgufValue* align = Find("general.alignment")) {
    if (!align->is_integer() || align->integer <= 0 || align->integer > (1 << 20) ||
        (align->integer & (align->integer - 1)) != 0) {
      return DataLoss(path + ": general.alignment must be a power of two");
    }
    alignment_ = static_cast<uint64_t>(align->integer);
  }

  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    RADIX_RETURN_IF_ERROR(r.ReadString(&info.name, "tensor name"));
    uint32_t n_dims = 0;
    RADIX_RETURN_IF_ERROR(r.Read(&n_dims, "tensor rank"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return r.Fail("tensor " + info.name + " has rank " + std::to_string(n_dims));
    int64_t elements = 1;
    info.shape.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      RADIX_RETURN_IF_ERROR(r.Read(&dim, "tensor dimension"));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dim)) {
        return r.Fail("tensor " + info.name + " has an invalid dimension " + std::to_string(dim));
      }
      elements *= static_cast<int64_t>(dim);
      info.shape[n_dims - 1 - d] = static_cast<int64_t>(dim);
    }
    RADIX_RETURN_IF_ERROR(r.Read(&info.ggml_type, "tensor type"));
    RADIX_RETURN_IF_ERROR(r.Read(&info.offset, "tensor offset"));
    auto format = kernels::FormatFromGgmlType(info.ggml_type);
    if (!format) {
      return Unsupported(path + ": tensor " + info.name + " has ggml type " +
                         std::to_string(info.ggml_type) + ", which radixserve cannot load");
    }
    info.format = *format;
    // Quantized rows must hold whole blocks.
    if (info.shape.back() % kernels::BlockElements(info.format) != 0) {
      return DataLoss(path + ": tensor " + info.name + " row length " +
                      std::to_string(info.shape.back()) + " is not a multiple of the " +
                      std::string(kernels::FormatName(info.format)) + " block size");
    }
    auto bytes = kernels::StorageBytes(info.format, elements);
    if (!bytes) return r.Fail("tensor " + info.name + " is too large");
    info.bytes = *bytes;
    if (info.offset % alignment_ != 0) {
      return DataLoss(path + ": tensor " + info.name + " data offset is not aligned");
    }
    if (!tensor_index_.emplace(info.name, tensors_.size()).second) {
      return r.Fail("duplicate tensor " + info.name);
    }
    tensors_.push_back(std::move(info));
  }

  const uint64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > file_.size() && !tensors_.empty()) {
    return DataLoss(path + ": truncated before the tensor data");
  }
  const uint64_t data_size = data_start <= file_.size() ? file_.size() - data_start : 0;
  std::vector<std::pair<uint64_t, size_t>> order;
  order.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& t = tensors_[i];
    if (t.offset > data_size || static_cast<uint64_t>(t.bytes) > data_size - t.offset) {
      return DataLoss(path + ": tensor " + t.name + " data (" + std::to_string(t.bytes) +
                      " bytes at offset " + std::to_string(t.offset) +
                      ") extends past the end of the file (truncated?)");
    }
    t.data = file_.data() + data_start + t.offset;
    order.emplace_back(t.offset, i);
  }
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = tensors_[order[i - 1].second];
    if (prev.offset + static_cast<uint64_t>(prev.bytes) > order[i].first) {
      return DataLoss(path + ": tensors " + prev.name + " and " + tensors_[order[i].second].name +
                      " overlap");
    }
  }
  return Status::Ok();
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Expected<std::optional<int64_t>> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_integer()) return DataLoss(path() + ": metadata " + key + " is not an integer");
  return std::optional<int64_t>(v->integer);
}

Expected<std::optional<double>> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<double>();
  if (v->is_float()) return std::optional<double>(v->real);
  if (v->is_integer()) return std::optional<double>(static_cast<double>(v->integer));
  return DataLoss(path() + ": metadata " + key + " is not a number");
}

Expected<std::optional<std::string>> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->type != GgufType::kString)
    return DataLoss(path() + ": metadata " + key + " is not a string");
  return std::optional<std::string>(v->string);
}

}  // namespace radixserve::model
