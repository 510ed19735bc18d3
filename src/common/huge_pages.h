// Memory for large buffers that are read over and over (packed weights): allocations of at least
// kHugePageBytes are mapped on a 2 MB boundary and marked MADV_HUGEPAGE, so that where transparent
// huge pages are set to `madvise` (a common default) the kernel backs their whole 2 MB pages with
// huge pages (the tail past the last boundary stays on 4 KB pages). A
// decode step streams every weight: with 4 KB pages that is a TLB miss every 4 KB, and the
// hardware prefetchers stop at each 4 KB boundary. Smaller allocations come from operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace radixserve {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Raw memory of `bytes` (aligned to 64 bytes at least); nullptr when it cannot be had.
void* AllocateLarge(size_t bytes);
// Frees what AllocateLarge returned for the same `bytes`.
void FreeLarge(void* p, size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  T* allocate(size_t n) {
    void* p = AllocateLarge(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { FreeLarge(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

// A byte buffer on HugePageAllocator.
using LargeBuffer = std::vector<uint8_t, HugePageAllocator<uint8_t>>;

}  // namespace radixserve
