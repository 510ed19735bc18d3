#include "model/paged_attention.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/check.h"

namespace radixserve::model {

BatchLayout BatchLayout::Build(const ForwardBatch& batch, int64_t num_slots) {
  BatchLayout layout;
  const int64_t n = batch.num_tokens();
  RADIX_CHECK(static_cast<int64_t>(batch.positions.size()) == n);
  layout.token_seq.reserve(static_cast<size_t>(n));
  layout.token_kv_pos.reserve(static_cast<size_t>(n));
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceExtend& seq = batch.sequences[s];
    RADIX_CHECK(seq.prefix_len >= 0 && seq.extend_len >= 0);
    RADIX_CHECK(static_cast<int64_t>(seq.kv_slots.size()) >= seq.prefix_len + seq.extend_len);
    for (int64_t j = 0; j < seq.prefix_len + seq.extend_len; ++j) {
      RADIX_CHECK(seq.kv_slots[static_cast<size_t>(j)] >= 0 &&
                  seq.kv_slots[static_cast<size_t>(j)] < num_slots);
    }
    const auto tree_size = static_cast<int64_t>(seq.tree_parents.size());
    const int64_t tree_begin = seq.extend_len - tree_size;  // extend index of tree token 0
    RADIX_CHECK(tree_size == 0 || tree_begin >= 1);
    std::vector<int64_t> depth(static_cast<size_t>(tree_size));
    for (int64_t i = 0; i < seq.extend_len; ++i) {
      layout.token_seq.push_back(static_cast<int32_t>(s));
      layout.token_kv_pos.push_back(seq.prefix_len + i);
      layout.token_attend_pos.push_back(seq.prefix_len + i);
      layout.token_view.push_back(-1);
      if (i < tree_begin) continue;
      const int64_t node = i - tree_begin;
      const int32_t parent = seq.tree_parents[static_cast<size_t>(node)];
      RADIX_CHECK(parent >= -1 && parent < node);
      depth[static_cast<size_t>(node)] = parent < 0 ? 1 : depth[static_cast<size_t>(parent)] + 1;
      // A node whose ancestors are exactly the tree tokens before it reads the sequence as is.
      if (depth[static_cast<size_t>(node)] == node + 1) continue;
      const int64_t root_pos = seq.prefix_len + tree_begin - 1;
      std::vector<int32_t> view(seq.kv_slots.begin(),
                                seq.kv_slots.begin() + static_cast<ptrdiff_t>(root_pos + 1));
      view.resize(static_cast<size_t>(root_pos + 1 + depth[static_cast<size_t>(node)]));
      for (int64_t at = node; at >= 0; at = seq.tree_parents[static_cast<size_t>(at)]) {
        view[static_cast<size_t>(root_pos + depth[static_cast<size_t>(at)])] =
            seq.kv_slots[static_cast<size_t>(seq.prefix_len + tree_begin + at)];
      }
      layout.token_attend_pos.back() = root_pos + depth[static_cast<size_t>(node)];
      layout.token_view.back() = static_cast<int32_t>(layout.views.size());
      layout.views.push_back(std::move(view));
    }
  }
  RADIX_CHECK(static_cast<int64_t>(layout.token_seq.size()) == n);
  for (int64_t idx : batch.logit_indices) RADIX_CHECK(idx >= 0 && idx < n);
  return layout;
}

namespace {

// Partial floats from which the merge runs on the pool rather than on the calling thread.
constexpr int64_t kParallelMergeFloats = int64_t{1} << 18;

// The queries of one (sequence, KV head, token block) and where its chunk partials live.
struct QueryGroup {
  int64_t t0 = 0, t1 = 0;  // batch tokens [t0, t1)
  int kv_head = 0;
  const int32_t* slots = nullptr;  // the sequence's kv_slots, or a tree token's view
  int64_t chunk_begin = 0, chunk_count = 0;
  int64_t partial_offset = 0;  // floats into the partial buffer; chunk c at + c * stride
};

// One key chunk of `heads` consecutive groups (the KV heads of one token block). Taking all heads
// of a slot together reads each KV row's cache lines while they are hot; heads are split into
// separate items only when there would otherwise be too few items for the pool.
struct WorkItem {
  int64_t group = 0;
  int64_t heads = 1;
  int64_t chunk = 0;  // index within the groups' chunks
};

}  // namespace

void PagedAttention(const kernels::KernelTable& table, ThreadPool* pool, const ForwardBatch& batch,
                    const BatchLayout& layout, const kernels::AttentionShape& shape,
                    int64_t sliding_window, const float* q, const float* k, const float* v,
                    kernels::KvBuffer k_cache, kernels::KvBuffer v_cache, float* out,
                    const float* sinks) {
  RADIX_CHECK(k_cache.type == v_cache.type);
  RADIX_CHECK(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0);
  const kernels::AttentionKernels& ak = kernels::AttentionKernelsFor(table);
  const int64_t n = batch.num_tokens();
  const int64_t d = shape.head_dim;
  const int64_t kv_width = static_cast<int64_t>(shape.num_kv_heads) * d;
  const int64_t q_width = static_cast<int64_t>(shape.num_heads) * d;
  const int64_t group_size = shape.num_heads / shape.num_kv_heads;
  const size_t row_bytes = kernels::KvRowBytes(k_cache.type, shape.num_kv_heads, d);
  const kernels::KvRowRuns runs = kernels::KvRowRunsOf(k_cache.type, shape.num_kv_heads, d);
  for (int64_t t = 0; t < n; ++t) {
    const SequenceExtend& seq =
        batch.sequences[static_cast<size_t>(layout.token_seq[static_cast<size_t>(t)])];
    const int64_t slot =
        seq.kv_slots[static_cast<size_t>(layout.token_kv_pos[static_cast<size_t>(t)])];
    auto* k_row = static_cast<uint8_t*>(k_cache.data) + static_cast<size_t>(slot) * row_bytes;
    auto* v_row = static_cast<uint8_t*>(v_cache.data) + static_cast<size_t>(slot) * row_bytes;
    for (int64_t r = 0; r < runs.count; ++r) {
      const size_t at = static_cast<size_t>(r) * runs.bytes;
      const int64_t from = t * kv_width + r * runs.values;
      ak.store(k + from, runs.values, k_cache.type, k_cache.scale, k_row + at);
      // One buffer holds both when the values are a prefix of the keys (MLA).
      if (v_row != k_row) ak.store(v + from, runs.values, v_cache.type, v_cache.scale, v_row + at);
    }
  }

  std::vector<QueryGroup> groups;
  int64_t block_chunks = 0;
  int64_t partial_floats = 0;
  int64_t t_begin = 0;
  auto view_of = [&layout](int64_t t) { return layout.token_view[static_cast<size_t>(t)]; };
  for (const SequenceExtend& seq : batch.sequences) {
    for (int64_t b0 = 0, b1 = 0; b0 < seq.extend_len; b0 = b1) {
      // A block shares its key rows: tokens reading their sequence's slots, up to
      // kQueryBlockTokens of them, or one tree token with its own view.
      const int32_t view = view_of(t_begin + b0);
      b1 = b0 + 1;
      while (view < 0 && b1 < seq.extend_len && b1 - b0 < kQueryBlockTokens &&
             view_of(t_begin + b1) < 0) {
        ++b1;
      }
      const int32_t* slots =
          view < 0 ? seq.kv_slots.data() : layout.views[static_cast<size_t>(view)].data();
      const int64_t pos_lo = layout.token_attend_pos[static_cast<size_t>(t_begin + b0)];
      const int64_t pos_hi = layout.token_attend_pos[static_cast<size_t>(t_begin + b1 - 1)];
      const int64_t key_lo =
          sliding_window > 0 ? std::max<int64_t>(0, pos_lo - sliding_window + 1) : 0;
      const int64_t chunk_begin = key_lo / kernels::kKeyChunk;
      const int64_t chunk_count = pos_hi / kernels::kKeyChunk + 1 - chunk_begin;
      const int64_t nq = (b1 - b0) * group_size;
      for (int h = 0; h < shape.num_kv_heads; ++h) {
        groups.push_back(QueryGroup{t_begin + b0, t_begin + b1, h, slots, chunk_begin, chunk_count,
                                    partial_floats});
        partial_floats += chunk_count * nq * (d + 2);
      }
      block_chunks += chunk_count;
    }
    t_begin += seq.extend_len;
  }
  RADIX_CHECK(t_begin == n);
  const int threads = pool == nullptr ? 1 : pool->size();
  const int64_t heads_per_item = block_chunks < 2 * threads ? 1 : shape.num_kv_heads;
  std::vector<WorkItem> items;
  for (size_t g = 0; g < groups.size(); g += static_cast<size_t>(shape.num_kv_heads)) {
    for (int64_t c = 0; c < groups[g].chunk_count; ++c) {
      for (int64_t h = 0; h < shape.num_kv_heads; h += heads_per_item) {
        items.push_back(WorkItem{static_cast<int64_t>(g) + h, heads_per_item, c});
      }
    }
  }
  thread_local std::vector<float> partials;
  if (static_cast<int64_t>(partials.size()) < partial_floats) {
    partials.resize(static_cast<size_t>(partial_floats));
  }
  float* partial_base = partials.data();

  auto attend = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> q_blocks;
    thread_local std::vector<int64_t> first, last;
    thread_local std::vector<kernels::QueryBlock> blocks;
    thread_local std::vector<float*> ms, ls, accs;
    for (int64_t it = begin; it < end; ++it) {
      const WorkItem& item = items[static_cast<size_t>(it)];
      // The item's groups share their tokens (and so first, last and the key range); each has
      // its own KV head's queries and partials.
      const QueryGroup& g0 = groups[static_cast<size_t>(item.group)];
      const int64_t nq = (g0.t1 - g0.t0) * group_size;
      const auto heads = static_cast<size_t>(item.heads);
      q_blocks.resize(heads * static_cast<size_t>(nq * d));
      first.resize(static_cast<size_t>(nq));
      last.resize(static_cast<size_t>(nq));
      int64_t max_last = 0;
      for (int64_t t = g0.t0; t < g0.t1; ++t) {
        const int64_t pos = layout.token_attend_pos[static_cast<size_t>(t)];
        const int64_t lo = sliding_window > 0 ? std::max<int64_t>(0, pos - sliding_window + 1) : 0;
        max_last = std::max(max_last, pos);
        const int64_t i0 = (t - g0.t0) * group_size;
        for (size_t h = 0; h < heads; ++h) {
          const QueryGroup& g = groups[static_cast<size_t>(item.group) + h];
          std::memcpy(q_blocks.data() + (static_cast<int64_t>(h) * nq + i0) * d,
                      q + t * q_width + g.kv_head * group_size * d,
                      sizeof(float) * static_cast<size_t>(group_size * d));
        }
        for (int64_t i = i0; i < i0 + group_size; ++i) {
          first[static_cast<size_t>(i)] = lo;
          last[static_cast<size_t>(i)] = pos;
        }
      }
      const int64_t key_begin = (g0.chunk_begin + item.chunk) * kernels::kKeyChunk;
      const int64_t key_end = std::min(key_begin + kernels::kKeyChunk, max_last + 1);
      blocks.clear();
      ms.clear();
      ls.clear();
      accs.clear();
      for (size_t h = 0; h < heads; ++h) {
        const QueryGroup& g = groups[static_cast<size_t>(item.group) + h];
        blocks.push_back(kernels::QueryBlock{q_blocks.data() + static_cast<int64_t>(h) * nq * d, nq,
                                             first.data(), last.data(), g.kv_head});
        float* p = partial_base + g.partial_offset + item.chunk * nq * (d + 2);
        ms.push_back(p);
        ls.push_back(p + nq);
        accs.push_back(p + 2 * nq);
      }
      kernels::AttendChunkHeads(table, shape, blocks.data(), static_cast<int>(heads), k_cache,
                                v_cache, g0.slots, key_begin, key_end, ms.data(), ls.data(),
                                accs.data());
    }
  };
  auto merge = [&](int64_t begin, int64_t end) {
    for (int64_t gi = begin; gi < end; ++gi) {
      const QueryGroup& g = groups[static_cast<size_t>(gi)];
      const int64_t nq = (g.t1 - g.t0) * group_size;
      const int64_t stride = nq * (d + 2);
      const float* p = partial_base + g.partial_offset;
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t t = g.t0 + i / group_size;
        const int64_t head = g.kv_head * group_size + i % group_size;
        kernels::MergeChunks(
            p + i, p + nq + i, stride, p + 2 * nq + i * d, stride, g.chunk_count, d,
            out + t * q_width + head * d,
            sinks == nullptr ? -std::numeric_limits<float>::infinity() : sinks[head]);
      }
    }
  };
  const auto num_items = static_cast<int64_t>(items.size());
  const auto num_groups = static_cast<int64_t>(groups.size());
  if (pool == nullptr || pool->size() == 1) {
    attend(0, num_items);
  } else {
    pool->ParallelFor(num_items, 1, attend);
  }
  // A few multiply-adds per partial: cheaper inline than another hand-off to the pool, unless
  // the partials are many (a prefill block at depth: 1 MB and more, read back from memory).
  if (pool == nullptr || pool->size() == 1 || partial_floats < kParallelMergeFloats) {
    merge(0, num_groups);
  } else {
    pool->ParallelFor(num_groups, 1, merge);
  }
}

}  // namespace radixserve::model
