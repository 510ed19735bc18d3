#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace radixserve::model {

Expected<MappedFile> MappedFile::Open(const std::string& path, bool use_mmap) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    return InvalidArgument(path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ == 0) {
    ::close(fd);
    return file;
  }
  if (use_mmap) {
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return InvalidArgument(path + ": mmap failed: " + std::strerror(errno));
    file.mapping_ = p;
    file.data_ = static_cast<const uint8_t*>(p);
    return file;
  }
  file.owned_.resize(file.size_);
  uint64_t done = 0;
  while (done < file.size_) {
    const ssize_t n = ::read(fd, file.owned_.data() + done, file.size_ - done);
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return DataLoss(path + ": read failed: " + (n == 0 ? "unexpected end" : std::strerror(err)));
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  file.data_ = file.owned_.data();
  return file;
}

uint64_t MappedFile::DropPages(const void* begin, uint64_t bytes) const {
  const auto* p = static_cast<const uint8_t*>(begin);
  if (mapping_ == nullptr || p < data_ || bytes > size_ ||
      static_cast<uint64_t>(p - data_) > size_ - bytes) {
    return 0;
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED) != 0) return 0;
  return end - first;
}

MappedFile MappedFile::FromBytes(std::vector<uint8_t> bytes, std::string name) {
  MappedFile file;
  file.path_ = std::move(name);
  file.owned_ = std::move(bytes);
  file.size_ = file.owned_.size();
  file.data_ = file.owned_.data();
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this == &other) return *this;
  Release();
  path_ = std::move(other.path_);
  size_ = other.size_;
  mapping_ = other.mapping_;
  owned_ = std::move(other.owned_);
  data_ = mapping_ != nullptr ? static_cast<const uint8_t*>(mapping_) : owned_.data();
  other.mapping_ = nullptr;
  other.data_ = nullptr;
  other.size_ = 0;
  return *this;
}

MappedFile::~MappedFile() { Release(); }

void MappedFile::Release() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
  mapping_ = nullptr;
  data_ = nullptr;
}

}  // namespace radixserve::model
