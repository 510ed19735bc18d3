// ForRows: runs fn(begin, end) over [0, rows), on the thread pool only when the batch is big
// enough to pay for the hand-off. Shared by the decoder and encoder forward passes.
#pragma once

#include <cstdint>

#include "common/thread_pool.h"

namespace radixserve::model {

// Row-wise passes go to the pool only for batches big enough to pay for the hand-off.
inline constexpr int64_t kParallelRows = 32;

template <typename Fn>
void ForRows(ThreadPool* pool, int64_t rows, Fn&& fn) {
  if (pool == nullptr || rows < kParallelRows || pool->size() == 1) {
    fn(int64_t{0}, rows);
  } else {
    pool->ParallelFor(rows, 8, fn);
  }
}

}  // namespace radixserve::model
