#include "dist/tp_group.h"

#include <algorithm>

#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "common/log.h"

namespace radixserve::dist {

Expected<std::unique_ptr<TpGroup>> TpGroup::Connect(const TpGroupOptions& options,
                                                    gloo::rendezvous::Store& store) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.local_address;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(store, device);
    std::unique_ptr<TpGroup> group(new TpGroup(std::move(context), options.timeout));
    // Shared memory among `size` of the ranks (this one `local` among them; `store` theirs). Every
    // rank of the group must take the same path: null unless all of them could map it.
    const auto attach = [&](int local, int size, gloo::rendezvous::Store& shm_store) {
      auto shm = ShmReducer::Attach(local, size, shm_store, options.timeout);
      if (group->Sum(shm.ok() ? 1 : 0) == options.size) {
        if (local == 0) (*shm)->Unlink();  // all mapped it (the Sum was a barrier)
        return std::move(shm).value();
      }
      if (!shm.ok()) {
        RADIX_LOG_WARN("tensor-parallel rank {}: {}; all-reduce goes over TCP", options.rank,
                       shm.status().message());
      }
      return std::unique_ptr<ShmReducer>();
    };
    const int per_node = options.ranks_per_node;
    if (options.shared_memory) {
      group->shm_ = attach(options.rank, options.size, store);
    } else if (per_node > 1 && per_node < options.size && options.size % per_node == 0) {
      const int node = options.rank / per_node, local = options.rank % per_node;
      gloo::rendezvous::PrefixStore node_store("node" + std::to_string(node), store);
      group->node_shm_ = attach(local, per_node, node_store);
      if (group->node_shm_ != nullptr) {
        if (local == 0) {
          gloo::rendezvous::PrefixStore leaders_store("leaders", store);
          auto leaders = std::make_shared<gloo::rendezvous::Context>(node, options.size / per_node);
          leaders->setTimeout(options.timeout);
          leaders->connectFullMesh(leaders_store, device);
          group->node_leaders_.reset(new TpGroup(std::move(leaders), options.timeout));
        }
        group->Sum(1);  // the leaders are connected
      }
    }
    return group;
  } catch (const std::exception& e) {
    return Unavailable("tensor-parallel rank " + std::to_string(options.rank) + " of " +
                       std::to_string(options.size) + " cannot join its group: " + e.what());
  }
}

void TpGroup::Fail(const char* operation, const std::exception& error) const {
  StopRank(fmt::format(
      "tensor-parallel rank {} of {}: {} failed ({}); a rank exited or cannot be reached within "
      "--dist-timeout {} s, stopping",
      rank_, size_, operation, error.what(), timeout_.count() / 1000));
}

void TpGroup::AllReduceSum(float* data, int64_t count) {
  if (shm_ != nullptr) {
    shm_->AllReduceSum(data, count);
    return;
  }
  if (node_shm_ != nullptr) {
    // The machine's sum on every local rank; the machines' sums added up among their first
    // ranks; then the first rank's result to the others (they add zeros to it: exact).
    node_shm_->AllReduceSum(data, count);
    if (node_leaders_ != nullptr) {
      node_leaders_->AllReduceSum(data, count);
    } else {
      std::fill(data, data + count, 0.0f);
    }
    node_shm_->AllReduceSum(data, count);
    return;
  }
  const auto bytes = static_cast<size_t>(count) * sizeof(float);
  if (size_ == 2 || bytes <= kDirectBytes) {
    ExchangeAndSum(data, count);
    return;
  }
  RingSum(data, static_cast<size_t>(count), "all-reduce");
}

template <typename T>
void TpGroup::RingSum(T* data, size_t count, const char* operation) {
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    Fail(operation, e);
  }
}

void TpGroup::ExchangeAndSum(float* data, int64_t count) {
  const auto n = static_cast<size_t>(count);
  const auto bytes = n * sizeof(float);
  // Unique per call, the same on every rank (they all-reduce in the same order); the top byte
  // keeps clear of the slots gloo's own collectives build.
  const uint64_t slot = (uint64_t{0x7e} << 56) | (exchanges_++ & 0xffffffffffffULL);
  try {
    theirs_.resize(static_cast<size_t>(size_) * n);
    auto mine = context_->createUnboundBuffer(data, bytes);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> receives;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      receives.push_back(
          context_->createUnboundBuffer(theirs_.data() + static_cast<size_t>(r) * n, bytes));
      receives.back()->recv(r, slot);
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) mine->send(r, slot);
    }
    for (auto& receive : receives) {
      if (!receive->waitRecv(timeout_)) throw gloo::IoException("receive timed out");
    }
    for (int r = 0; r < size_ - 1; ++r) {
      if (!mine->waitSend(timeout_)) throw gloo::IoException("send timed out");
    }
  } catch (const std::exception& e) {
    Fail("all-reduce", e);
  }
  // Every rank adds the parts in rank order, so all get the same bits.
  std::copy(data, data + n, theirs_.data() + static_cast<size_t>(rank_) * n);
  std::copy(theirs_.data(), theirs_.data() + n, data);
  for (int r = 1; r < size_; ++r) {
    const float* part = theirs_.data() + static_cast<size_t>(r) * n;
    for (size_t i = 0; i < n; ++i) data[i] += part[i];
  }
}

void TpGroup::Broadcast(void* data, size_t bytes) {
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(0);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    Fail("broadcast", e);
  }
}

uint64_t TpGroup::PointToPointSlot(int from, int to, uint64_t n) {
  // Clear of gloo's own slots and of ExchangeAndSum's (top byte 0x7e).
  return (uint64_t{0x7d} << 56) | (static_cast<uint64_t>(from & 0xff) << 48) |
         (static_cast<uint64_t>(to & 0xff) << 40) | (n & 0xffffffffffULL);
}

void TpGroup::SendAsync(int to, const void* data, size_t bytes) {
  const uint64_t slot = PointToPointSlot(rank_, to, sent_[static_cast<size_t>(to)]++);
  try {
    PendingSend& send = sends_.emplace_back();
    const auto* begin = static_cast<const uint8_t*>(data);
    send.bytes.assign(begin, begin + bytes);
    send.buffer = context_->createUnboundBuffer(send.bytes.data(), bytes);
    send.buffer->send(to, slot);
  } catch (const std::exception& e) {
    Fail("pipeline send", e);
  }
}

void TpGroup::Receive(int from, void* data, size_t bytes) {
  const uint64_t slot = PointToPointSlot(from, rank_, received_[static_cast<size_t>(from)]++);
  try {
    auto buffer = context_->createUnboundBuffer(data, bytes);
    buffer->recv(from, slot);
    if (!buffer->waitRecv(timeout_)) throw gloo::IoException("receive timed out");
  } catch (const std::exception& e) {
    Fail("pipeline receive", e);
  }
}

void TpGroup::WaitSends() {
  try {
    for (PendingSend& send : sends_) {
      if (!send.buffer->waitSend(timeout_)) throw gloo::IoException("send timed out");
    }
  } catch (const std::exception& e) {
    Fail("pipeline send", e);
  }
  sends_.clear();
}

int64_t TpGroup::Sum(int64_t value) {
  RingSum(&value, 1, "barrier");
  return value;
}

}  // namespace radixserve::dist
