// MappedFile: the read-only bytes of a checkpoint file, memory-mapped (default) or read into
// memory (--weight-loader-disable-mmap). Move-only; the bytes live as long as the object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace radixserve::model {

class MappedFile {
 public:
  static Expected<MappedFile> Open(const std::string& path, bool use_mmap);
  // Wraps bytes already in memory (tests, fuzzing).
  static MappedFile FromBytes(std::vector<uint8_t> bytes, std::string name);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops this process's pages of [begin, begin + bytes) (the whole pages inside it) when the
  // range lies in the mapping: resident memory falls, the page cache keeps the file, and a later
  // read faults the pages back in with the same bytes (the mapping is private and read-only).
  // Returns the bytes dropped; 0 for read-in files and ranges outside the mapping.
  uint64_t DropPages(const void* begin, uint64_t bytes) const;

 private:
  MappedFile() = default;
  void Release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when mmap'd
  std::vector<uint8_t> owned_;
};

}  // namespace radixserve::model
