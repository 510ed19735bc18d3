// Latency of the tensor-parallel collectives (src/dist/tp_group.h) between processes on this
// machine: rank 0 forks the others, they meet through the rendezvous store on loopback, and each
// size is all-reduced (and broadcast) `iterations` times. Prints microseconds per operation: the
// per-collective cost docs/scaling.md's model starts from.
//
//   collectives_bench [ranks=2] [iterations=2000] [shm|tcp]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/tcp_store.h"
#include "dist/tp_group.h"

using radixserve::dist::TcpStore;
using radixserve::dist::TcpStoreServer;
using radixserve::dist::TpGroup;
using radixserve::dist::TpGroupOptions;

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) return 1;
  const int port = (*server)->port();
  int rank = 0;
  for (int r = 1; r < ranks; ++r) {
    if (fork() == 0) {
      rank = r;
      break;
    }
  }
  auto store = TcpStore::Connect("127.0.0.1", port, std::chrono::seconds(10));
  if (!store.ok()) return 1;
  TpGroupOptions options;
  options.rank = rank;
  options.size = ranks;
  options.shared_memory = argc > 3 && std::string(argv[3]) == "shm";
  auto group = TpGroup::Connect(options, **store);
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", group.status().message().c_str());
    return 1;
  }
  for (int64_t floats : {1, 2048, 8192, 65536, 1 << 20}) {
    std::vector<float> data(static_cast<size_t>(floats), 1.0f);
    const int n = floats >= (1 << 20) ? iterations / 20 : iterations;
    (*group)->AllReduceSum(data.data(), floats);  // warm
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) (*group)->AllReduceSum(data.data(), floats);
    const double reduce_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        n;
    const auto start_b = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) (*group)->Broadcast(data.data(), data.size() * sizeof(float));
    const double broadcast_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_b)
            .count() /
        n;
    if (rank == 0) {
      std::printf("ranks %d  %8lld floats: all-reduce %9.1f us  broadcast %9.1f us\n", ranks,
                  static_cast<long long>(floats), reduce_us, broadcast_us);
    }
  }
  (*group)->Sum(1);
  if (rank > 0) std::_Exit(0);  // the store server's thread lives in rank 0 only
  for (int r = 1; r < ranks; ++r) wait(nullptr);
  return 0;
}
