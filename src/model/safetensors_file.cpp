#include "model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

namespace radixserve::model {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

// Bytes per element of a valid safetensors dtype radixserve does not load; 0 for any other name.
int64_t UnloadableDtypeBytes(const std::string& d) {
  static const std::pair<const char*, int64_t> kOther[] = {
      {"F64", 8}, {"I64", 8}, {"U64", 8}, {"I32", 4},  {"U32", 4},     {"I16", 2},
      {"U16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (auto [name, bytes] : kOther) {
    if (d == name) return bytes;
  }
  return 0;
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::Open(const std::string& path, bool use_mmap) {
  RADIX_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path, use_mmap));
  return Parse(std::move(file));
}

Expected<SafetensorsFile> SafetensorsFile::Parse(MappedFile file) {
  SafetensorsFile st(std::move(file));
  RADIX_RETURN_IF_ERROR(st.ParseAll());
  return st;
}

Status SafetensorsFile::ParseAll() {
  const std::string& path = file_.path();
  auto bad = [&](const std::string& what) {
    return DataLoss(path + ": malformed safetensors: " + what);
  };
  if (file_.size() < 8) return bad("file shorter than its 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_.data(), 8);
  if (header_len > kMaxHeaderBytes || header_len > file_.size() - 8) {
    return bad("header length " + std::to_string(header_len) + " exceeds the file");
  }
  const char* header_begin = reinterpret_cast<const char*>(file_.data() + 8);
  nlohmann::json header = nlohmann::json::parse(header_begin, header_begin + header_len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("header is not valid JSON");
  if (!header.is_object()) return bad("header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_.size() - data_start;

  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges_of_all;  // begin, end, name
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string())
          return bad("__metadata__ value " + m.key() + " is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad_tensor = [&](const std::string& what) { return bad("tensor " + name + ": " + what); };
    if (!entry.is_object()) return bad_tensor("entry is not an object");
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return bad_tensor("missing dtype");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad_tensor("missing shape");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return bad_tensor("data_offsets must be [begin, end]");
    }
    SafetensorsTensor t;
    t.name = name;
    const std::string dtype = dtype_it->get<std::string>();
    const int64_t other_bytes = UnloadableDtypeBytes(dtype);
    if (dtype == "F32") {
      t.format = kernels::WeightFormat::kF32;
    } else if (dtype == "F16") {
      t.format = kernels::WeightFormat::kF16;
    } else if (dtype == "BF16") {
      t.format = kernels::WeightFormat::kBF16;
    } else if (other_bytes == 0) {
      return bad_tensor("unknown dtype " + dtype);
    }
    int64_t elements = 1;
    for (const auto& dim : *shape_it) {
      if (!dim.is_number_unsigned())
        return bad_tensor("shape entries must be non-negative integers");
      const uint64_t d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (d != 0 && elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(d))) {
        return bad_tensor("shape overflows");
      }
      elements *= static_cast<int64_t>(d);
      t.shape.push_back(static_cast<int64_t>(d));
    }
    const auto& begin_json = (*offsets_it)[0];
    const auto& end_json = (*offsets_it)[1];
    if (!begin_json.is_number_unsigned() || !end_json.is_number_unsigned()) {
      return bad_tensor("data_offsets must be non-negative integers");
    }
    const uint64_t begin = begin_json.get<uint64_t>(), end = end_json.get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad_tensor("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] out of bounds (data section has " + std::to_string(data_size) +
                        " bytes; truncated?)");
    }
    auto bytes = kernels::StorageBytes(t.format, elements);
    if (other_bytes != 0) {
      bytes = elements <= std::numeric_limits<int64_t>::max() / other_bytes
                  ? std::optional<int64_t>(elements * other_bytes)
                  : std::nullopt;
    }
    if (!bytes || static_cast<uint64_t>(*bytes) != end - begin) {
      return bad_tensor("data_offsets span " + std::to_string(end - begin) +
                        " bytes but shape and dtype need " +
                        (bytes ? std::to_string(*bytes) : "too many"));
    }
    ranges_of_all.emplace_back(begin, end, name);
    t.bytes = *bytes;
    t.data = file_.data() + data_start + begin;
    if (other_bytes != 0) {
      other_dtypes_[name] = dtype;
      others_[name] = std::move(t);
      continue;
    }
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges_of_all.begin(), ranges_of_all.end());
  for (size_t i = 1; i < ranges_of_all.size(); ++i) {
    if (std::get<1>(ranges_of_all[i - 1]) > std::get<0>(ranges_of_all[i])) {
      return bad("tensors " + std::get<2>(ranges_of_all[i - 1]) + " and " +
                 std::get<2>(ranges_of_all[i]) + " overlap");
    }
  }
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor* SafetensorsFile::FindOther(const std::string& name) const {
  auto it = others_.find(name);
  return it == others_.end() ? nullptr : &it->second;
}

}  // namespace radixserve::model
