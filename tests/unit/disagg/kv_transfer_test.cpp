#include "disagg/kv_transfer.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace radixserve::disagg {
namespace {

using Rows = KvTransfer::Rows;
using namespace std::chrono_literals;

// Long enough never to matter on a loaded machine; only failures wait this long.
constexpr auto kPatience = 60s;

std::unique_ptr<KvTransfer> Make(Role role, double timeout_s = 60.0, int port = 0) {
  KvTransferOptions options;
  options.role = role;
  options.listen_host = "127.0.0.1";
  options.bootstrap_port = port;
  options.timeout_s = timeout_s;
  Expected<std::unique_ptr<KvTransfer>> made = KvTransfer::Create(options);
  RADIX_CHECK(made.ok());
  return std::move(made).value();
}

Rows MakeRows(size_t tokens, size_t row_bytes = 16) {
  auto rows = std::make_shared<kv::KvRows>();
  rows->layout = {.num_layers = 3, .row_bytes = row_bytes, .dtype = "bf16", .fingerprint = 77};
  for (size_t i = 0; i < tokens; ++i) rows->tokens.push_back(static_cast<int32_t>(i * 3 + 1));
  rows->bytes.resize(rows->ExpectedBytes());
  for (size_t i = 0; i < rows->bytes.size(); ++i) rows->bytes[i] = std::byte(i * 131 % 251);
  return rows;
}

std::future<Expected<Rows>> Fetch(KvTransfer& decode, int port, uint64_t room) {
  auto promise = std::make_shared<std::promise<Expected<Rows>>>();
  std::future<Expected<Rows>> future = promise->get_future();
  decode.Fetch("127.0.0.1", port, room,
               [promise](Expected<Rows> rows) { promise->set_value(std::move(rows)); });
  return future;
}

Expected<Rows> Wait(std::future<Expected<Rows>>& future) {
  RADIX_CHECK(future.wait_for(kPatience) == std::future_status::ready);
  return future.get();
}

// Polls the prefill side's stats until `done` holds (the service updates them on its thread).
template <typename F>
bool Eventually(const KvTransfer& transfer, F done) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done(transfer.stats())) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// A decode server's side of the wire, by hand: connects and asks for `room`.
boost::asio::ip::tcp::socket Claim(boost::asio::io_context& ioc, int port, uint64_t room) {
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  std::vector<std::byte> hello(16);
  const uint32_t magic = 0x56584b52, version = 1;
  std::memcpy(hello.data(), &magic, 4);
  std::memcpy(hello.data() + 4, &version, 4);
  std::memcpy(hello.data() + 8, &room, 8);
  boost::asio::write(socket, boost::asio::buffer(hello));
  return socket;
}

void ExpectSame(const kv::KvRows& got, const kv::KvRows& want) {
  EXPECT_EQ(got.layout, want.layout);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_TRUE(got.bytes == want.bytes);
}

TEST(KvTransferTest, RowsPublishedFirstReachTheDecodeServer) {
  auto prefill = Make(Role::kPrefill);
  auto decode = Make(Role::kDecode);
  const Rows rows = MakeRows(50);
  prefill->Publish(42, rows, "");
  ASSERT_TRUE(Eventually(
      *prefill, [&](const KvTransferStats& s) { return s.pending_bytes == rows->bytes.size(); }));
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 42);
  Expected<Rows> got = Wait(fetched);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSame(**got, *rows);
  ASSERT_TRUE(Eventually(
      *prefill, [](const KvTransferStats& s) { return s.sent == 1 && s.pending_bytes == 0; }));
  EXPECT_EQ(decode->stats().received, 1u);
}

TEST(KvTransferTest, AFetchWaitsForRowsPublishedLater) {
  auto prefill = Make(Role::kPrefill);
  auto decode = Make(Role::kDecode);
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 7);
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) { return s.pending_rooms == 1; }));
  const Rows rows = MakeRows(1000);
  prefill->Publish(7, rows, "");
  Expected<Rows> got = Wait(fetched);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSame(**got, *rows);
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) {
    return s.sent == 1 && s.pending_bytes == 0 && s.pending_rooms == 0;
  }));
}

TEST(KvTransferTest, ManyRoomsAtOnceEachGetTheirOwnRows) {
  auto prefill = Make(Role::kPrefill);
  auto decode = Make(Role::kDecode);
  std::vector<Rows> rows;
  std::vector<std::future<Expected<Rows>>> fetched;
  for (uint64_t room = 0; room < 16; ++room) {
    rows.push_back(MakeRows(10 + room));
    if (room % 2 == 0) prefill->Publish(room, rows.back(), "");
    fetched.push_back(Fetch(*decode, prefill->bootstrap_port(), room));
  }
  for (uint64_t room = 1; room < 16; room += 2) prefill->Publish(room, rows[room], "");
  for (uint64_t room = 0; room < 16; ++room) {
    Expected<Rows> got = Wait(fetched[room]);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ExpectSame(**got, *rows[room]);
  }
  ASSERT_TRUE(Eventually(
      *prefill, [](const KvTransferStats& s) { return s.sent == 16 && s.pending_bytes == 0; }));
}

TEST(KvTransferTest, AFailedPrefillIsReportedToTheDecodeServer) {
  auto prefill = Make(Role::kPrefill);
  auto decode = Make(Role::kDecode);
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 9);
  prefill->Publish(9, nullptr, "the prompt is too long");
  Expected<Rows> got = Wait(fetched);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("the prompt is too long"), std::string::npos);
  EXPECT_NE(got.status().message().find("bootstrap_room 9"), std::string::npos);
}

TEST(KvTransferTest, ARoomNobodyPublishesTimesOut) {
  auto prefill = Make(Role::kPrefill, /*timeout_s=*/0.2);
  auto decode = Make(Role::kDecode);
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 5);
  Expected<Rows> got = Wait(fetched);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("no request with this bootstrap_room"), std::string::npos);
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) { return s.pending_rooms == 0; }));
}

TEST(KvTransferTest, RowsNobodyFetchesAreDroppedAfterTheTimeout) {
  auto prefill = Make(Role::kPrefill, /*timeout_s=*/0.2);
  prefill->Publish(3, MakeRows(100), "");
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) {
    return s.dropped == 1 && s.pending_bytes == 0 && s.pending_rooms == 0;
  }));
}

TEST(KvTransferTest, ADecodeServerThatLeavesWhileWaitingFreesTheRowsAtOnce) {
  auto prefill = Make(Role::kPrefill);
  {
    // A decode server asks for room 11, then dies (its connection closes) before the rows exist.
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket = Claim(ioc, prefill->bootstrap_port(), 11);
    ASSERT_TRUE(
        Eventually(*prefill, [](const KvTransferStats& s) { return s.pending_rooms == 1; }));
  }
  // The rows come after the decode side is gone: dropped, nothing stays pending.
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) { return s.abandoned == 1; }));
  prefill->Publish(11, MakeRows(200), "");
  ASSERT_TRUE(Eventually(
      *prefill, [](const KvTransferStats& s) { return s.dropped == 1 && s.pending_bytes == 0; }));
}

TEST(KvTransferTest, ADecodeServerThatDiesMidTransferFreesTheRows) {
  auto prefill = Make(Role::kPrefill);
  const Rows rows = MakeRows(1 << 14, 512);  // 48 MiB: far more than the socket buffers hold
  prefill->Publish(12, rows, "");
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket = Claim(ioc, prefill->bootstrap_port(), 12);
    std::vector<std::byte> some(1 << 20);
    boost::asio::read(socket, boost::asio::buffer(some));  // the transfer has started
  }
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) {
    return s.dropped == 1 && s.sent == 0 && s.pending_bytes == 0;
  }));
}

TEST(KvTransferTest, RowsOfAnotherLayoutAreRefusedBeforeTheyAreRead) {
  auto prefill = Make(Role::kPrefill);
  KvTransferOptions options;
  options.role = Role::kDecode;
  options.layout =
      kv::KvRowsLayout{.num_layers = 3, .row_bytes = 8, .dtype = "f16", .fingerprint = 78};
  auto decode = std::move(KvTransfer::Create(options)).value();
  prefill->Publish(21, MakeRows(1 << 12, 4096), "");  // 96 MiB the decode side never reads
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 21);
  Expected<Rows> got = Wait(fetched);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("layout"), std::string::npos) << got.status().message();
  EXPECT_EQ(decode->stats().bytes_received, 0u);
  ASSERT_TRUE(Eventually(*prefill, [](const KvTransferStats& s) {
    return s.pending_bytes == 0 && s.sent == 0 && s.dropped == 1;
  }));
}

TEST(KvTransferTest, APromptLongerThanTheContextIsRefused) {
  auto prefill = Make(Role::kPrefill);
  KvTransferOptions options;
  options.role = Role::kDecode;
  options.max_tokens = 100;
  auto decode = std::move(KvTransfer::Create(options)).value();
  prefill->Publish(22, MakeRows(101), "");
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 22);
  Expected<Rows> got = Wait(fetched);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("at most 100 tokens"), std::string::npos);
}

TEST(KvTransferTest, NobodyListeningFailsTheFetch) {
  auto prefill = Make(Role::kPrefill);
  const int port = prefill->bootstrap_port();
  prefill.reset();  // closed
  auto decode = Make(Role::kDecode);
  auto fetched = Fetch(*decode, port, 1);
  Expected<Rows> got = Wait(fetched);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("cannot connect"), std::string::npos);
  EXPECT_EQ(decode->stats().failed, 1u);
}

TEST(KvTransferTest, ThePortInUseIsAClearError) {
  auto prefill = Make(Role::kPrefill);
  KvTransferOptions options;
  options.role = Role::kPrefill;
  options.listen_host = "127.0.0.1";
  options.bootstrap_port = prefill->bootstrap_port();
  Expected<std::unique_ptr<KvTransfer>> second = KvTransfer::Create(options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("--disaggregation-bootstrap-port"), std::string::npos);
}

TEST(KvTransferTest, GarbageOnTheBootstrapPortIsClosed) {
  auto prefill = Make(Role::kPrefill);
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"),
                  static_cast<uint16_t>(prefill->bootstrap_port())});
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::asio::write(socket, boost::asio::buffer(junk));
  std::array<char, 8> buffer{};
  boost::system::error_code ec;
  boost::asio::read(socket, boost::asio::buffer(buffer), ec);
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset)
      << ec.message();
  // Still serving.
  auto decode = Make(Role::kDecode);
  prefill->Publish(1, MakeRows(4), "");
  auto fetched = Fetch(*decode, prefill->bootstrap_port(), 1);
  EXPECT_TRUE(Wait(fetched).ok());
}

}  // namespace
}  // namespace radixserve::disagg
