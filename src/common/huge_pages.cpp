#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace radixserve {

namespace {

// Whole 4 KB pages: the tail past the last 2 MB boundary stays on small pages, so a buffer's
// resident size is not rounded up to the next huge page.
size_t MappedBytes(size_t bytes) {
  constexpr size_t kPage = 4096;
  return (bytes + kPage - 1) / kPage * kPage;
}

}  // namespace

void* AllocateLarge(size_t bytes) {
  if (bytes < kHugePageBytes) {
    return ::operator new (bytes, std::align_val_t{64}, std::nothrow);
  }
  // One huge page more than needed, so that a 2 MB boundary lies inside; the rest is given back.
  const size_t mapped = MappedBytes(bytes);
  const size_t reserve = mapped + kHugePageBytes;
  void* base = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(base, aligned - start);
  const uintptr_t end = start + reserve, used_end = aligned + mapped;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  // Advice only: without transparent huge pages the mapping works as before.
  madvise(reinterpret_cast<void*>(aligned), mapped, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void FreeLarge(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes) {
    ::operator delete (p, std::align_val_t{64});
    return;
  }
  munmap(p, MappedBytes(bytes));
}

}  // namespace radixserve
