#include "disagg/kv_transfer.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "common/log.h"

namespace radixserve::disagg {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr uint32_t kMagic = 0x56584b52;  // "RKXV" in memory order
constexpr uint32_t kVersion = 1;
constexpr uint32_t kStatusRows = 0;
constexpr uint32_t kStatusFailure = 1;
constexpr size_t kHelloBytes = 16;
constexpr size_t kHeadBytes = 8;
constexpr size_t kLayoutBytes = 32;
constexpr uint32_t kMaxDtypeName = 64;
constexpr uint32_t kMaxMessage = 4096;
// A connection that has not said which room it wants by then is closed.
constexpr auto kHelloTimeout = std::chrono::seconds(30);
constexpr auto kSweepInterval = std::chrono::seconds(1);

template <typename T>
void Put(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T Get(const std::byte* in, size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof(T));
  return value;
}

std::chrono::nanoseconds Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

}  // namespace

struct KvTransfer::Impl {
  struct Room {
    std::shared_ptr<tcp::socket> waiter;  // a decode server's connection waiting for the rows
    Rows rows;
    std::string failure;
    bool published = false;
    bool abandoned = false;  // its decode server went away before the rows came
    Clock::time_point deadline;
  };

  struct FetchOp {
    explicit FetchOp(asio::io_context& ioc) : socket(ioc), resolver(ioc), timer(ioc) {}
    tcp::socket socket;
    tcp::resolver resolver;
    asio::steady_timer timer;
    FetchDone done;
    std::string where;  // "the prefill server at host:port (room N)"
    std::array<std::byte, kHelloBytes> hello{};
    std::array<std::byte, kHeadBytes> head{};
    std::array<std::byte, kLayoutBytes> layout{};
    std::vector<char> text;
    std::shared_ptr<kv::KvRows> rows;
    bool finished = false;
  };

  explicit Impl(const KvTransferOptions& opts)
      : options(opts), work(asio::make_work_guard(ioc)), acceptor(ioc), sweep(ioc) {}

  KvTransferOptions options;
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
  asio::steady_timer sweep;
  std::unordered_map<uint64_t, Room> rooms;  // transfer thread only
  int port = 0;
  mutable std::mutex stats_mu;
  KvTransferStats stats;
  std::thread thread;

  template <typename F>
  void Count(F&& update) {
    std::lock_guard lock(stats_mu);
    update(stats);
    stats.pending_rooms = rooms.size();
  }

  // --- prefill side ---

  void Accept() {
    auto socket = std::make_shared<tcp::socket>(ioc);
    acceptor.async_accept(*socket, [this, socket](const ErrorCode& ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) ReadHello(socket);
      Accept();
    });
  }

  void ReadHello(const std::shared_ptr<tcp::socket>& socket) {
    auto hello = std::make_shared<std::array<std::byte, kHelloBytes>>();
    auto timer = std::make_shared<asio::steady_timer>(ioc, kHelloTimeout);
    timer->async_wait([socket](const ErrorCode& ec) {
      if (!ec) socket->close();
    });
    asio::async_read(*socket, asio::buffer(*hello),
                     [this, socket, hello, timer](const ErrorCode& ec, size_t) {
                       timer->cancel();
                       if (ec) return;
                       if (Get<uint32_t>(hello->data(), 0) != kMagic ||
                           Get<uint32_t>(hello->data(), 4) != kVersion) {
                         socket->close();
                         return;
                       }
                       Claim(Get<uint64_t>(hello->data(), 8), socket);
                     });
  }

  void Claim(uint64_t id, const std::shared_ptr<tcp::socket>& socket) {
    auto [it, fresh] = rooms.try_emplace(id);
    Room& room = it->second;
    if (fresh) room.deadline = Clock::now() + Seconds(options.timeout_s);
    if (room.waiter) {
      Send(socket, nullptr, fmt::format("room {} is already being fetched", id));
      return;
    }
    if (room.published) {
      Room taken = std::move(room);
      rooms.erase(it);
      const uint64_t held = taken.rows ? taken.rows->bytes.size() : 0;
      Send(socket, std::move(taken.rows), std::move(taken.failure), held);
      return;
    }
    room.abandoned = false;
    room.waiter = socket;
    Count([](KvTransferStats&) {});
    WatchClose(id, socket);
  }

  // A waiting connection that closes (or sends anything) gives up its room.
  void WatchClose(uint64_t id, const std::shared_ptr<tcp::socket>& socket) {
    auto byte = std::make_shared<std::array<std::byte, 1>>();
    socket->async_read_some(asio::buffer(*byte),
                            [this, id, socket, byte](const ErrorCode&, size_t) {
                              auto it = rooms.find(id);
                              if (it == rooms.end() || it->second.waiter != socket)
                                return;  // being answered
                              it->second.waiter.reset();
                              it->second.abandoned = true;
                              socket->close();
                              Count([](KvTransferStats& s) { ++s.abandoned; });
                            });
  }

  void OnPublish(uint64_t id, Rows rows, std::string failure) {
    auto [it, fresh] = rooms.try_emplace(id);
    Room& room = it->second;
    const uint64_t bytes = rows ? rows->bytes.size() : 0;
    if (room.abandoned || room.published) {
      if (room.published) RADIX_LOG_WARN("KV transfer: room {} published twice; dropped.", id);
      if (room.abandoned) rooms.erase(it);
      Count([&](KvTransferStats& s) { ++s.dropped; });
      return;
    }
    Count([&](KvTransferStats& s) { s.pending_bytes += bytes; });
    if (room.waiter) {
      std::shared_ptr<tcp::socket> socket = std::move(room.waiter);
      rooms.erase(it);
      socket->cancel();  // the close watch
      Send(socket, std::move(rows), std::move(failure), bytes);
      return;
    }
    room.rows = std::move(rows);
    room.failure = std::move(failure);
    room.published = true;
    room.deadline = Clock::now() + Seconds(options.timeout_s);
    Count([](KvTransferStats&) {});
    if (fresh || bytes > 0) EnforceBound();
  }

  // Drops published rows, earliest deadline first, while the pending bytes exceed the bound.
  void EnforceBound() {
    while (true) {
      uint64_t pending = 0;
      {
        std::lock_guard lock(stats_mu);
        pending = stats.pending_bytes;
      }
      if (pending <= options.max_pending_bytes) return;
      auto oldest = rooms.end();
      for (auto it = rooms.begin(); it != rooms.end(); ++it) {
        if (it->second.published && it->second.rows &&
            (oldest == rooms.end() || it->second.deadline < oldest->second.deadline)) {
          oldest = it;
        }
      }
      if (oldest == rooms.end()) return;
      RADIX_LOG_WARN(
          "KV transfer: dropping the rows of room {} ({} bytes): rows waiting for decode servers "
          "exceed {} bytes.",
          oldest->first, oldest->second.rows->bytes.size(), options.max_pending_bytes);
      DropRoom(oldest);
    }
  }

  void DropRoom(std::unordered_map<uint64_t, Room>::iterator it) {
    const uint64_t bytes = it->second.rows ? it->second.rows->bytes.size() : 0;
    rooms.erase(it);
    Count([&](KvTransferStats& s) {
      s.pending_bytes -= bytes;
      ++s.dropped;
    });
  }

  // Answers a decode server: the rows, or the failure. `held` bytes of pending rows are released
  // once the write ends.
  void Send(const std::shared_ptr<tcp::socket>& socket, Rows rows, std::string failure,
            uint64_t held = 0) {
    auto header = std::make_shared<std::vector<std::byte>>();
    Put(*header, kMagic);
    std::vector<asio::const_buffer> buffers;
    if (rows) {
      Put(*header, kStatusRows);
      Put(*header, rows->layout.num_layers);
      Put(*header, static_cast<uint32_t>(rows->layout.dtype.size()));
      Put(*header, rows->layout.row_bytes);
      Put(*header, rows->layout.fingerprint);
      Put(*header, static_cast<uint64_t>(rows->tokens.size()));
      for (const char c : rows->layout.dtype) Put(*header, c);
      buffers.emplace_back(asio::buffer(*header));
      buffers.emplace_back(asio::buffer(rows->tokens));
      buffers.emplace_back(asio::buffer(rows->bytes));
    } else {
      if (failure.empty()) failure = "the prefill server produced no KV for this request";
      if (failure.size() > kMaxMessage) failure.resize(kMaxMessage);
      Put(*header, kStatusFailure);
      Put(*header, static_cast<uint32_t>(failure.size()));
      for (const char c : failure) Put(*header, c);
      buffers.emplace_back(asio::buffer(*header));
    }
    asio::async_write(
        *socket, buffers, [this, socket, header, rows, held](const ErrorCode& ec, size_t written) {
          Count([&](KvTransferStats& s) {
            s.pending_bytes -= held;
            s.bytes_sent += written;
            if (!rows) return;
            if (ec) {
              ++s.dropped;
            } else {
              ++s.sent;
            }
          });
          if (ec && rows) {
            RADIX_LOG_WARN("KV transfer: sending {} tokens' rows failed ({}); dropped.",
                           rows->tokens.size(), ec.message());
          }
          ErrorCode ignored;
          socket->shutdown(tcp::socket::shutdown_both, ignored);
          socket->close(ignored);
        });
  }

  void Sweep() {
    sweep.expires_after(kSweepInterval);
    sweep.async_wait([this](const ErrorCode& ec) {
      if (ec) return;
      const auto now = Clock::now();
      for (auto it = rooms.begin(); it != rooms.end();) {
        auto next = std::next(it);
        if (it->second.deadline <= now) {
          if (it->second.waiter) {
            std::shared_ptr<tcp::socket> socket = std::move(it->second.waiter);
            rooms.erase(it);
            socket->cancel();
            Send(socket, nullptr,
                 fmt::format("no request with this bootstrap_room reached the prefill server "
                             "within {} s",
                             options.timeout_s));
          } else if (it->second.published) {
            RADIX_LOG_WARN("KV transfer: no decode server fetched room {} within {} s; dropped.",
                           it->first, options.timeout_s);
            DropRoom(it);
          } else {
            rooms.erase(it);
          }
        }
        it = next;
      }
      Count([](KvTransferStats&) {});
      Sweep();
    });
  }

  // --- decode side ---

  void StartFetch(const std::string& host, int port, uint64_t room, FetchDone done) {
    auto op = std::make_shared<FetchOp>(ioc);
    op->done = std::move(done);
    op->where = fmt::format("the prefill server at {}:{} (bootstrap_room {})", host, port, room);
    std::vector<std::byte> hello;
    Put(hello, kMagic);
    Put(hello, kVersion);
    Put(hello, room);
    std::memcpy(op->hello.data(), hello.data(), kHelloBytes);
    op->timer.expires_after(Seconds(options.timeout_s));
    op->timer.async_wait([this, op](const ErrorCode& ec) {
      if (!ec) Fail(op, fmt::format("no answer within {} s", options.timeout_s));
    });
    op->resolver.async_resolve(
        host, std::to_string(port),
        [this, op](const ErrorCode& ec, const tcp::resolver::results_type& endpoints) {
          if (ec) return Fail(op, "cannot resolve the host: " + ec.message());
          asio::async_connect(op->socket, endpoints,
                              [this, op](const ErrorCode& ec2, const tcp::endpoint&) {
                                if (ec2) return Fail(op, "cannot connect: " + ec2.message());
                                SendHello(op);
                              });
        });
  }

  void SendHello(const std::shared_ptr<FetchOp>& op) {
    asio::async_write(op->socket, asio::buffer(op->hello), [this, op](const ErrorCode& ec, size_t) {
      if (ec) return Fail(op, "connection lost: " + ec.message());
      asio::async_read(op->socket, asio::buffer(op->head),
                       [this, op](const ErrorCode& ec2, size_t) {
                         if (ec2) return Fail(op, "connection lost: " + ec2.message());
                         OnHead(op);
                       });
    });
  }

  void OnHead(const std::shared_ptr<FetchOp>& op) {
    if (Get<uint32_t>(op->head.data(), 0) != kMagic) {
      return Fail(op, "the peer is not a radixserve prefill server");
    }
    const auto status = Get<uint32_t>(op->head.data(), 4);
    if (status == kStatusFailure) {
      auto length = std::make_shared<std::array<std::byte, 4>>();
      asio::async_read(op->socket, asio::buffer(*length),
                       [this, op, length](const ErrorCode& ec, size_t) {
                         if (ec) return Fail(op, "connection lost: " + ec.message());
                         const uint32_t n = std::min(Get<uint32_t>(length->data(), 0), kMaxMessage);
                         op->text.resize(n);
                         asio::async_read(op->socket, asio::buffer(op->text),
                                          [this, op](const ErrorCode& ec2, size_t) {
                                            if (ec2) return Fail(op, "connection lost");
                                            Fail(op, std::string(op->text.begin(), op->text.end()));
                                          });
                       });
      return;
    }
    if (status != kStatusRows) return Fail(op, "unknown answer");
    asio::async_read(op->socket, asio::buffer(op->layout), [this, op](const ErrorCode& ec, size_t) {
      if (ec) return Fail(op, "connection lost: " + ec.message());
      OnLayout(op);
    });
  }

  void OnLayout(const std::shared_ptr<FetchOp>& op) {
    const std::byte* p = op->layout.data();
    auto rows = std::make_shared<kv::KvRows>();
    rows->layout.num_layers = Get<int32_t>(p, 0);
    const auto name_len = Get<uint32_t>(p, 4);
    rows->layout.row_bytes = Get<uint64_t>(p, 8);
    rows->layout.fingerprint = Get<uint64_t>(p, 16);
    const auto tokens = Get<uint64_t>(p, 24);
    if (const std::optional<kv::KvRowsLayout>& want = options.layout;
        want &&
        (rows->layout.num_layers != want->num_layers || rows->layout.row_bytes != want->row_bytes ||
         rows->layout.fingerprint != want->fingerprint)) {
      return Fail(op,
                  fmt::format("the prefill server's KV cache layout ({} layers, {} bytes per "
                              "row) differs from this server's ({}): run both with the same "
                              "model and --kv-cache-dtype",
                              rows->layout.num_layers, rows->layout.row_bytes, want->Describe()));
    }
    if (name_len > kMaxDtypeName || rows->layout.num_layers <= 0 || tokens > options.max_tokens ||
        rows->layout.row_bytes == 0 || rows->layout.row_bytes > (uint64_t{1} << 24) ||
        static_cast<uint64_t>(rows->layout.num_layers) > 4096) {
      return Fail(op, fmt::format("refused an answer of {} tokens x {} layers x {} bytes per row "
                                  "(at most {} tokens)",
                                  tokens, rows->layout.num_layers, rows->layout.row_bytes,
                                  options.max_tokens));
    }
    rows->tokens.resize(tokens);
    rows->bytes.resize(rows->ExpectedBytes());
    op->text.resize(name_len);
    op->rows = rows;
    std::vector<asio::mutable_buffer> buffers{asio::buffer(op->text), asio::buffer(rows->tokens),
                                              asio::buffer(rows->bytes)};
    asio::async_read(op->socket, buffers, [this, op](const ErrorCode& ec, size_t read) {
      if (ec) return Fail(op, "connection lost during the transfer: " + ec.message());
      op->rows->layout.dtype.assign(op->text.begin(), op->text.end());
      Count([&](KvTransferStats& s) { s.bytes_received += read + kHeadBytes + kLayoutBytes; });
      Finish(op, Rows(std::move(op->rows)));
    });
  }

  void Fail(const std::shared_ptr<FetchOp>& op, const std::string& why) {
    if (op->finished) return;
    Count([](KvTransferStats& s) { ++s.failed; });
    Finish(op, Status(StatusCode::kUnavailable,
                      fmt::format("KV transfer from {} failed: {}", op->where, why)));
  }

  void Finish(const std::shared_ptr<FetchOp>& op, Expected<Rows> result) {
    if (op->finished) return;
    op->finished = true;
    if (result.ok()) Count([](KvTransferStats& s) { ++s.received; });
    op->timer.cancel();
    op->resolver.cancel();
    ErrorCode ignored;
    op->socket.close(ignored);
    FetchDone done = std::move(op->done);
    done(std::move(result));
  }
};

KvTransfer::KvTransfer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Expected<std::unique_ptr<KvTransfer>> KvTransfer::Create(const KvTransferOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->port = options.bootstrap_port;
  if (options.role == Role::kPrefill) {
    ErrorCode ec;
    const auto address = asio::ip::make_address(options.listen_host, ec);
    tcp::endpoint endpoint(ec ? asio::ip::address_v4::any() : address,
                           static_cast<uint16_t>(options.bootstrap_port));
    impl->acceptor.open(endpoint.protocol(), ec);
    if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) impl->acceptor.bind(endpoint, ec);
    if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("argument --disaggregation-bootstrap-port: cannot listen on {}:{} "
                                "({})",
                                options.listen_host, options.bootstrap_port, ec.message()));
    }
    impl->port = impl->acceptor.local_endpoint().port();
    impl->Accept();
    impl->Sweep();
  }
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->ioc.run(); });
  return std::unique_ptr<KvTransfer>(new KvTransfer(std::move(impl)));
}

KvTransfer::~KvTransfer() {
  asio::post(impl_->ioc, [impl = impl_.get()] {
    ErrorCode ignored;
    impl->acceptor.close(ignored);
    impl->sweep.cancel();
    impl->rooms.clear();
    impl->work.reset();
  });
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Role KvTransfer::role() const { return impl_->options.role; }
int KvTransfer::bootstrap_port() const { return impl_->port; }

void KvTransfer::Publish(uint64_t room, Rows rows, std::string failure) {
  asio::post(impl_->ioc, [impl = impl_.get(), room, rows = std::move(rows),
                          failure = std::move(failure)]() mutable {
    impl->OnPublish(room, std::move(rows), std::move(failure));
  });
}

void KvTransfer::Fetch(std::string host, int port, uint64_t room, FetchDone done) {
  asio::post(impl_->ioc, [impl = impl_.get(), host = std::move(host), port, room,
                          done = std::move(done)]() mutable {
    impl->StartFetch(host, port, room, std::move(done));
  });
}

KvTransferStats KvTransfer::stats() const {
  std::lock_guard lock(impl_->stats_mu);
  return impl_->stats;
}

}  // namespace radixserve::disagg
