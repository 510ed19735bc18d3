// BodyBudget: one server-wide bound on the request-body bytes held by all connections at once.
//
// A connection reserves a request's body before it reads it (its Content-Length, or what has
// arrived so far for chunked bodies) and gives the reservation back when the request has been
// handled or the connection closes. A reservation that would exceed the budget fails, and the
// session answers 503 instead of buffering: many slow uploads can then hold at most `limit`
// bytes, however many sockets they open. (Sessions exempt small bodies, up to 64 KiB, so that
// large uploads cannot starve ordinary requests.) Thread-safe (sessions run on different I/O
// threads).
#pragma once

#include <atomic>
#include <cstddef>

namespace radixserve::http {

class BodyBudget {
 public:
  explicit BodyBudget(std::size_t limit) : limit_(limit) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

  // Takes `bytes` from the budget; false (and nothing taken) when that would exceed the limit.
  bool TryTake(std::size_t bytes);
  void Give(std::size_t bytes);

  std::size_t limit() const { return limit_; }
  std::size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> in_use_{0};
};

// What one connection holds of a BodyBudget; gives it all back when reset or destroyed.
class BodyReservation {
 public:
  explicit BodyReservation(BodyBudget& budget) : budget_(budget) {}
  ~BodyReservation() { Reset(); }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;

  // Makes the reservation at least `bytes`; false when the budget cannot cover the growth.
  bool GrowTo(std::size_t bytes);
  void Reset();
  std::size_t bytes() const { return bytes_; }

 private:
  BodyBudget& budget_;
  std::size_t bytes_ = 0;
};

}  // namespace radixserve::http
