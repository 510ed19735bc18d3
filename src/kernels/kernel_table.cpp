#include "kernels/kernel_table.h"

#include <cstdlib>
#include <string>

#include "common/log.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels {

namespace x86 {
const KernelTable& Avx2Table();
const KernelTable& Avx512Table();
}  // namespace x86

const KernelTable* Avx2Kernels() { return x86::CpuHasAvx2() ? &x86::Avx2Table() : nullptr; }

const KernelTable* Avx512Kernels() { return x86::CpuHasAvx512() ? &x86::Avx512Table() : nullptr; }

std::vector<const KernelTable*> AvailableKernels() {
  std::vector<const KernelTable*> out{&RefKernels()};
  if (const KernelTable* t = Avx2Kernels()) out.push_back(t);
  if (const KernelTable* t = Avx512Kernels()) out.push_back(t);
  return out;
}

namespace {

const KernelTable& Choose() {
  const char* forced = std::getenv("RADIX_KERNELS");
  if (forced != nullptr && *forced != '\0') {
    const std::string want(forced);
    for (const KernelTable* t : AvailableKernels()) {
      if (t->name == want) return *t;
    }
    RADIX_LOG_WARN("RADIX_KERNELS={} is not available on this CPU; using ref", want);
    return RefKernels();
  }
  if (const KernelTable* t = Avx512Kernels()) return *t;
  if (const KernelTable* t = Avx2Kernels()) return *t;
  return RefKernels();
}

}  // namespace

const KernelTable& ActiveKernels() {
  static const KernelTable& chosen = Choose();
  return chosen;
}

}  // namespace radixserve::kernels
