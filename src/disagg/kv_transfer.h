// KvTransfer: moves a prompt's K/V rows from a prefill server to a decode server (SGLang's PD
// disaggregation, `--disaggregation-mode prefill|decode`), over TCP on its own Asio thread.
//
// SGLang's router sends one request to both servers with the same bootstrap_host /
// bootstrap_port / bootstrap_room. The prefill server computes the prompt (and the first token)
// and Publishes the rows under the room; the decode server Fetches the room from
// bootstrap_host:bootstrap_port, where the prefill server listens
// (--disaggregation-bootstrap-port), and its engine puts the rows into its prefix cache before
// queueing the request. Either side may come first: a connection for a room not published yet waits
// for it, rows published before their decode server asked wait for it, both at most `timeout`. Rows
// nobody can take any more (the decode side closed its connection, timed out, or the pending bytes
// exceed their bound) are dropped at once.
//
// Wire format (native byte order, both hosts little-endian x86/arm):
//   decode -> prefill: u32 magic 'RXKV', u32 version, u64 room
//   prefill -> decode: u32 magic, u32 status (0 rows follow, 1 failure follows)
//     0: i32 layers, u32 dtype name length, u64 row bytes, u64 layout fingerprint, u64 tokens,
//        the dtype name, tokens x i32, then the rows (kv::KvRows::bytes)
//     1: u32 message length, the message
//
// Thread safety: every public method may be called from any thread; callbacks run on the
// transfer thread (they must not block).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "kv/kv_rows.h"

namespace radixserve::disagg {

enum class Role { kPrefill, kDecode };

struct KvTransferOptions {
  Role role = Role::kPrefill;
  // Prefill: where the bootstrap service listens (--host, --disaggregation-bootstrap-port; port 0
  // picks a free one, see bootstrap_port()).
  std::string listen_host = "127.0.0.1";
  int bootstrap_port = 8998;
  // How long a room waits for its other side, and a fetch for its rows, in seconds.
  double timeout_s = 300.0;
  // Prefill: rows published but not yet taken are dropped, oldest first, beyond this many bytes.
  uint64_t max_pending_bytes = uint64_t{8} << 30;
  // Decode: the layout the rows must have (this server's pool; checked on the answer's header,
  // before any row is read: rows for another pool are refused without allocating them), and the
  // longest prompt (tokens) a fetch accepts.
  std::optional<kv::KvRowsLayout> layout;
  uint64_t max_tokens = uint64_t{1} << 22;
};

struct KvTransferStats {
  uint64_t pending_rooms = 0;  // prefill: rooms holding rows or a waiting connection
  uint64_t pending_bytes = 0;  // prefill: bytes of rows not yet sent
  uint64_t sent = 0;           // prefill: transfers completed
  uint64_t dropped = 0;        // prefill: rows nobody took (gone, timed out, over the bound)
  uint64_t abandoned = 0;      // prefill: decode connections that closed while waiting
  uint64_t received = 0;       // decode: fetches completed
  uint64_t failed = 0;         // decode: fetches that failed
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

class KvTransfer {
 public:
  using Rows = std::shared_ptr<const kv::KvRows>;
  using FetchDone = std::function<void(Expected<Rows>)>;

  // Starts the transfer thread; the prefill role binds the bootstrap port (kUnavailable naming
  // it when that fails).
  static Expected<std::unique_ptr<KvTransfer>> Create(const KvTransferOptions& options);
  ~KvTransfer();  // stops the thread; pending fetches fail, pending rows are dropped

  KvTransfer(const KvTransfer&) = delete;
  KvTransfer& operator=(const KvTransfer&) = delete;

  Role role() const;
  int bootstrap_port() const;  // the port actually bound (prefill), else the configured one

  // Prefill: the prompt rows of `room` (null rows: the request failed, `failure` says why).
  void Publish(uint64_t room, Rows rows, std::string failure);
  // Decode: the rows of `room` from the prefill server at host:port; `done` runs once, on the
  // transfer thread.
  void Fetch(std::string host, int port, uint64_t room, FetchDone done);

  KvTransferStats stats() const;

 private:
  struct Impl;
  explicit KvTransfer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace radixserve::disagg
