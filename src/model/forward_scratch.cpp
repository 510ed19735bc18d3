#include "model/forward_scratch.h"

namespace radixserve::model {

ForwardScratch& ForwardScratch::ForThisThread() {
  thread_local ForwardScratch scratch;
  return scratch;
}

float* ForwardScratch::Reserve(std::vector<float>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

}  // namespace radixserve::model
