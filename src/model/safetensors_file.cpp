#include "model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

namespace radixserve::model {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

bool IsKnownUnloadableDtype(const std::string& d) {
  static const char* kOther[] = {"F64", "I64", "I32", "I16",  "I8",      "U8",
                                 "U16", "U32", "U64", "BOOL", "F8_E4M3", "F8_E5M2"};
  return std::any_of(std::begin(kOther), std::end(kOther), [&](const char* o) { return d == o; });
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::Open(const std::string& path, bool use_mmap) {
  auto file = MappedFile::Open(path, use_mmap);
  if (!file.ok()) return file.status();
  return Parse(std::move(file).value());
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

  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // begin, end (per tensor, same order)
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
    if (dtype == "F32") {
      t.format = kernels::WeightFormat::kF32;
    } else if (dtype == "F16") {
      t.format = kernels::WeightFormat::kF16;
    } else if (dtype == "BF16") {
      t.format = kernels::WeightFormat::kBF16;
    } else if (IsKnownUnloadableDtype(dtype)) {
      return Unsupported(path + ": tensor " + name + " has dtype " + dtype +
                         "; radixserve loads F32, F16 and BF16 weights");
    } else {
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
    if (!bytes || static_cast<uint64_t>(*bytes) != end - begin) {
      return bad_tensor("data_offsets span " + std::to_string(end - begin) +
                        " bytes but shape and dtype need " +
                        (bytes ? std::to_string(*bytes) : "too many"));
    }
    t.bytes = *bytes;
    t.data = file_.data() + data_start + begin;
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
    ranges.emplace_back(begin, end);
  }
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (ranges[order[i - 1]].second > ranges[order[i]].first) {
      return bad("tensors " + tensors_[order[i - 1]].name + " and " + tensors_[order[i]].name +
                 " overlap");
    }
  }
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace radixserve::model
