#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>
#include <cstdint>

#include "kernels/x86/amx.h"

namespace radixserve::kernels::x86 {
namespace {

// Linux's arch_prctl codes and the tile-data state component (asm/prctl.h, XFEATURE_XTILEDATA).
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureTileData = 18;

// CPUID.(EAX=7, ECX=0):EDX bit `feature` (22 AMX-BF16, 25 AMX-INT8) with AMX-TILE (bit 24), and
// the OS saving the tile state.
bool CpuHasAmx(int feature) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool wanted = (edx >> feature) & 1u, amx_tile = (edx >> 24) & 1u;
  const bool osxsave = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 27) & 1u);
  if (!wanted || !amx_tile || !osxsave) return false;
  // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves the tile state.
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((lo >> 17) & 3u) == 3u;
}

bool TileDataGranted() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) return false;
  unsigned long features = 0;  // NOLINT(runtime/int): the syscall's type
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) != 0) return false;
  return (features >> kXfeatureTileData) & 1u;
}

// The operand of LDTILECFG, palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace

void ConfigureTiles(const uint8_t (&rows)[8], const uint16_t (&colsb)[8]) {
  TileConfig config;
  for (int i = 0; i < 8; ++i) {
    config.rows[i] = rows[i];
    config.colsb[i] = colsb[i];
  }
  // Not _tile_loadconfig: its asm names only the first 8 bytes as read, so the compiler may drop
  // the stores of the rest of the configuration.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

void ReleaseTiles() { __asm__ volatile("tilerelease" ::: "memory"); }

bool AmxBf16Usable() {
  static const bool usable = CpuHasAmx(22) && TileDataGranted();
  return usable;
}

bool AmxInt8Usable() {
  static const bool usable = CpuHasAmx(25) && TileDataGranted();
  return usable;
}

}  // namespace radixserve::kernels::x86
