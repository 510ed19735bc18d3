// Micro-benchmark of the packed integer MatMul (quant_matmul.h) at Llama-3.2-1B's FFN shape
// (8192 x 2048 and 2048 x 8192) for the block formats GGUF files hold, over token counts from a
// single-stream decode (1) through batched decode (4, 32) to a prefill chunk (512). Prints the
// best of several runs as G multiply-adds per second, and the mean of those runs (what a server,
// which lives with every run, sees); the machine is shared, so compare runs taken back to back,
// never across sessions.
//
//   quant_kernels_bench [threads] [format] [n] [ROWSxCOLS]   (default: 2 threads, every format
//                                                           and n, the two FFN shapes)
// A format name (Q4_K, Q6_K, ...) and a token count (any, not only the four above) narrow the
// run, e.g. for a profiler or to compare tilings (RADIX_QUANT_TILES=expand|compact); a shape
// replaces the two FFN ones, e.g. `2 Q8_0 1 262144x640` for Gemma 3 270M's output matrix, which
// (178 MB) streams from memory where the FFN shapes stay in a large L3. GB/s: the GGUF bytes of
// the matrix per run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/half.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"
#include "kernels/weight_format.h"
#include "run_timing.h"

namespace radixserve {
namespace {

using kernels::WeightFormat;

// Random codes with small half-precision scales (the scale fields of each block format).
std::vector<uint8_t> RandomBlocks(WeightFormat format, int64_t rows, int64_t cols,
                                  std::mt19937& rng) {
  std::vector<uint8_t> data(static_cast<size_t>(rows * *kernels::StorageBytes(format, cols)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto put_half = [&](uint8_t* p) {
    const uint16_t h = kernels::F32ToF16(scale(rng));
    std::memcpy(p, &h, 2);
  };
  const auto block_bytes = static_cast<size_t>(kernels::BlockBytes(format));
  for (size_t off = 0; off < data.size(); off += block_bytes) {
    uint8_t* b = data.data() + off;
    if (format == WeightFormat::kQ6_K) {
      put_half(b + 208);
      continue;
    }
    put_half(b);
    put_half(b + 2);
  }
  return data;
}

void BenchFormat(ThreadPool& pool, WeightFormat format, int64_t only_n,
                 const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  const kernels::KernelTable& table = kernels::ActiveKernels();
  std::mt19937 rng(1);
  for (const auto& [rows, cols] : shapes) {
    const auto bytes = RandomBlocks(format, rows, cols, rng);
    const kernels::WeightMatrix w{format, rows, cols, bytes.data()};
    const kernels::PackedWeight packed = kernels::Pack(table, &pool, w);
    const std::vector<int64_t> counts =
        only_n > 0 ? std::vector<int64_t>{only_n} : std::vector<int64_t>{1, 4, 32, 512};
    for (const int64_t n : counts) {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n * cols));
      for (float& v : x) v = dist(rng);
      std::vector<float> y(static_cast<size_t>(n * rows));
      const int reps = (n >= 512 ? 3 : n >= 32 ? 10 : 40) * (only_n > 0 ? 50 : 1);
      const bench::RunSeconds s = bench::TimeRuns(reps, [&] {
        kernels::MatMul(table, &pool, x.data(), n, packed, y.data(),
                        kernels::ActivationMode::kGgmlRounded);
      });
      const double macs = static_cast<double>(rows * cols * n);
      const auto gguf_bytes = static_cast<double>(bytes.size());
      std::printf(
          "%-5s %5lld x %-5lld n=%-4lld %8.2f ms  %7.1f GMAC/s  (mean of %d: %7.1f)  %6.1f GB/s "
          "(mean %6.1f)\n",
          std::string(kernels::FormatName(format)).c_str(), static_cast<long long>(rows),
          static_cast<long long>(cols), static_cast<long long>(n), s.best * 1e3,
          macs / s.best * 1e-9, reps, macs / s.mean * 1e-9, gguf_bytes / s.best * 1e-9,
          gguf_bytes / s.mean * 1e-9);
    }
  }
}

}  // namespace
}  // namespace radixserve

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  radixserve::ThreadPool pool(threads);
  std::printf(
      "quant MatMul variant: %s, %d threads\n",
      std::string(radixserve::kernels::QuantMatMulVariant(radixserve::kernels::ActiveKernels()))
          .c_str(),
      threads);
  using radixserve::kernels::WeightFormat;
  const std::string only_format = argc > 2 ? argv[2] : "";
  const int64_t only_n = argc > 3 ? std::atoll(argv[3]) : 0;
  std::vector<std::pair<int64_t, int64_t>> shapes{{8192, 2048}, {2048, 8192}};
  if (argc > 4) {
    long long rows = 0, cols = 0;
    if (std::sscanf(argv[4], "%lldx%lld", &rows, &cols) != 2 || rows <= 0 || cols <= 0) {
      std::fprintf(stderr, "quant_kernels_bench: shape %s is not ROWSxCOLS\n", argv[4]);
      return 2;
    }
    shapes = {{rows, cols}};
  }
  for (WeightFormat format : {WeightFormat::kQ4_K, WeightFormat::kQ6_K, WeightFormat::kQ4_1,
                              WeightFormat::kQ5_K, WeightFormat::kQ8_0}) {
    if (!only_format.empty() && radixserve::kernels::FormatName(format) != only_format) continue;
    radixserve::BenchFormat(pool, format, only_n, shapes);
  }
  return 0;
}
