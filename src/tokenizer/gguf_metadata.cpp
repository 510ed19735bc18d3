#include "tokenizer/gguf_metadata.h"

#include <cmath>
#include <cstring>
#include <fstream>

namespace radixserve::tokenizer {

namespace {

enum GgufType : uint32_t {
  kU8 = 0,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kF32,
  kBool,
  kString,
  kArray,
  kU64,
  kI64,
  kF64
};

// A float as an integer, 0 when it has none (NaN, infinite, out of range).
int64_t AsInt(double d) {
  return std::isfinite(d) && std::fabs(d) < 9.0e18 ? static_cast<int64_t>(d) : 0;
}

class Reader {
 public:
  explicit Reader(std::ifstream& in) : in_(in) {}
  bool ok() const { return ok_; }

  template <typename T>
  T Pod() {
    T v{};
    if (!in_.read(reinterpret_cast<char*>(&v), sizeof(T))) ok_ = false;
    return v;
  }
  std::string String() {
    const auto len = Pod<uint64_t>();
    if (!ok_ || len > (1ull << 30)) {
      ok_ = false;
      return {};
    }
    std::string s(len, '\0');
    if (!in_.read(s.data(), static_cast<std::streamsize>(len))) ok_ = false;
    return s;
  }
  // A scalar of `type` as a number; false for strings/arrays/unknown types.
  bool Number(uint32_t type, double& d, int64_t& i) {
    switch (type) {
      case kU8:
        i = Pod<uint8_t>();
        break;
      case kI8:
        i = Pod<int8_t>();
        break;
      case kU16:
        i = Pod<uint16_t>();
        break;
      case kI16:
        i = Pod<int16_t>();
        break;
      case kU32:
        i = Pod<uint32_t>();
        break;
      case kI32:
        i = Pod<int32_t>();
        break;
      case kU64:
        i = static_cast<int64_t>(Pod<uint64_t>());
        break;
      case kI64:
        i = Pod<int64_t>();
        break;
      case kBool:
        i = Pod<uint8_t>();
        break;
      case kF32:
        d = Pod<float>();
        i = AsInt(d);
        return true;
      case kF64:
        d = Pod<double>();
        i = AsInt(d);
        return true;
      default:
        return false;
    }
    d = static_cast<double>(i);
    return true;
  }

 private:
  std::ifstream& in_;
  bool ok_ = true;
};

}  // namespace

Expected<GgufMetadata> GgufMetadata::Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open GGUF file " + path);
  Reader r(in);
  char magic[4];
  in.read(magic, 4);
  if (!in || std::memcmp(magic, "GGUF", 4) != 0) return DataLoss(path + " is not a GGUF file");
  const auto version = r.Pod<uint32_t>();
  if (version < 2 || version > 3) {
    return Unsupported("GGUF version " + std::to_string(version) + " is not supported");
  }
  r.Pod<uint64_t>();  // tensor count
  const auto kv_count = r.Pod<uint64_t>();
  GgufMetadata meta;
  for (uint64_t k = 0; k < kv_count && r.ok(); ++k) {
    const std::string key = r.String();
    const auto type = r.Pod<uint32_t>();
    if (!r.ok()) break;
    if (type == kString) {
      meta.values_[key] = r.String();
    } else if (type == kArray) {
      const auto elem = r.Pod<uint32_t>();
      const auto n = r.Pod<uint64_t>();
      if (!r.ok() || n > (1ull << 28)) return DataLoss("GGUF array '" + key + "' is malformed");
      if (elem == kString) {
        std::vector<std::string> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n && r.ok(); ++i) v.push_back(r.String());
        meta.values_[key] = std::move(v);
      } else {
        std::vector<double> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n && r.ok(); ++i) {
          double d = 0;
          int64_t x = 0;
          if (!r.Number(elem, d, x)) return DataLoss("GGUF array '" + key + "' has bad type");
          v.push_back(d);
        }
        meta.values_[key] = std::move(v);
      }
    } else {
      double d = 0;
      int64_t i = 0;
      if (!r.Number(type, d, i)) return DataLoss("GGUF key '" + key + "' has unknown type");
      if (type == kBool) {
        meta.values_[key] = i != 0;
      } else if (type == kF32 || type == kF64) {
        meta.values_[key] = d;
      } else {
        meta.values_[key] = i;
      }
    }
  }
  if (!r.ok()) return DataLoss("GGUF metadata of " + path + " is truncated");
  return meta;
}

std::optional<std::string> GgufMetadata::GetString(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end() || !std::holds_alternative<std::string>(it->second)) return std::nullopt;
  return std::get<std::string>(it->second);
}

std::optional<int64_t> GgufMetadata::GetInt(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  if (std::holds_alternative<int64_t>(it->second)) return std::get<int64_t>(it->second);
  return std::nullopt;
}

std::optional<bool> GgufMetadata::GetBool(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  if (std::holds_alternative<bool>(it->second)) return std::get<bool>(it->second);
  if (std::holds_alternative<int64_t>(it->second)) return std::get<int64_t>(it->second) != 0;
  return std::nullopt;
}

const std::vector<std::string>* GgufMetadata::GetStrings(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return nullptr;
  return std::get_if<std::vector<std::string>>(&it->second);
}

const std::vector<double>* GgufMetadata::GetNumbers(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return nullptr;
  return std::get_if<std::vector<double>>(&it->second);
}

}  // namespace radixserve::tokenizer
