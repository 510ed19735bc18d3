#include "main/tensor_parallel.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdlib>
#include <string>

#include "args/validate.h"
#include "common/log.h"
#include "dist/tp_model.h"
#include "main/model_assets.h"
#include "model/model_loader.h"

namespace radixserve {
namespace {

namespace key = args::key;

// Set for the ranks a node's first process starts.
constexpr const char* kLocalRankEnv = "RADIXSERVE_TP_LOCAL_RANK";
constexpr const char* kStoreEnv = "RADIXSERVE_TP_STORE";

Status StartLocalRank(char** argv, int local_rank, const std::string& store) {
  // This binary's path (so the child's process name is radixserve's, not /proc/self/exe's).
  std::array<char, 4096> self{};
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (length <= 0) return Unavailable("cannot start tensor-parallel rank: /proc/self/exe");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Unavailable("cannot start tensor-parallel rank: fork failed");
  if (pid > 0) return Status::Ok();
  // The child: dies with its parent; the terminal's SIGINT is the parent's to handle.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) std::_Exit(1);
  std::signal(SIGINT, SIG_IGN);
  setenv(kLocalRankEnv, std::to_string(local_rank).c_str(), 1);
  setenv(kStoreEnv, store.c_str(), 1);
  execv(self.data(), argv);
  std::_Exit(127);
}

}  // namespace

Expected<TensorParallelSetup> SetUpTensorParallel(const args::ServerArgs& args, char** argv) {
  TensorParallelSetup tp;
  tp.size = static_cast<int>(args::ModelSplitRanks(args));
  tp.threads = static_cast<int>(args.GetInt(key::kThreads));
  if (tp.size == 1) return tp;
  const int nnodes = static_cast<int>(args.GetInt(key::kNnodes));
  const int per_node = tp.size / nnodes;
  const char* local_env = std::getenv(kLocalRankEnv);
  const int local_rank = local_env != nullptr ? std::atoi(local_env) : 0;
  tp.rank = static_cast<int>(args.GetInt(key::kNodeRank)) * per_node + local_rank;
  tp.threads = std::max(1, tp.threads / per_node);
  const auto timeout = std::chrono::seconds(args.GetOptionalInt(key::kDistTimeout).value_or(600));

  // Where the rendezvous store is: inherited, --dist-init-addr, or (one node) a free local port.
  std::string host = "127.0.0.1";
  int port = 0;
  const char* inherited = std::getenv(kStoreEnv);
  if (inherited != nullptr || !args.IsNull(key::kDistInitAddr)) {
    std::pair<std::string, int> parsed;
    RADIX_ASSIGN_OR_RETURN(
        parsed, inherited != nullptr
                    ? dist::ParseHostPort(inherited, kStoreEnv)
                    : dist::ParseHostPort(args.GetString(key::kDistInitAddr), "--dist-init-addr"));
    std::tie(host, port) = parsed;
  }
  if (tp.rank == 0) {
    const std::string bind_host = args.IsNull(key::kDistInitAddr) ? host : "0.0.0.0";
    RADIX_ASSIGN_OR_RETURN(tp.store_server, dist::TcpStoreServer::Start(bind_host, port));
    port = tp.store_server->port();
  }
  const std::string store_address = host + ":" + std::to_string(port);
  if (local_rank == 0) {
    for (int i = 1; i < per_node; ++i) {
      RADIX_RETURN_IF_ERROR(StartLocalRank(argv, i, store_address));
    }
  }
  RADIX_LOG_INFO(
      "tensor-parallel rank {} of {} (node {} of {}, {} threads): rendezvous at {}, timeout {} s",
      tp.rank, tp.size, args.GetInt(key::kNodeRank), nnodes, tp.threads, store_address,
      timeout.count());
  RADIX_ASSIGN_OR_RETURN(tp.store, dist::TcpStore::Connect(host, port, timeout));
  dist::TpGroupOptions options;
  options.rank = tp.rank;
  options.size = tp.size;
  options.timeout = timeout;
  options.shared_memory = nnodes == 1;
  RADIX_ASSIGN_OR_RETURN(options.local_address, dist::LocalAddressToward(host, port));
  RADIX_ASSIGN_OR_RETURN(tp.group, dist::TpGroup::Connect(options, *tp.store));
  RADIX_LOG_INFO("tensor-parallel rank {}: joined the group at {} (all-reduce over {})", tp.rank,
                 options.local_address, tp.group->shared_memory() ? "shared memory" : "TCP");
  return tp;
}

int RunFollowerRank(const args::ServerArgs& args, TensorParallelSetup& tp) {
  model::LoadOptions options = ModelLoadOptions(args, args.GetString(key::kModelPath));
  options.tensor_shard = tp.shard();
  auto shard = model::LoadModel(options);
  if (!shard.ok()) {
    RADIX_LOG_ERROR("tensor-parallel rank {}: {}", tp.rank, shard.status().message());
    return 1;  // the leader's start barrier fails on the closed connections
  }
  tp.group->Sum(1);
  ThreadPool pool(tp.threads);
  return dist::RunTensorParallelFollower(**shard, *tp.group, &pool);
}

Status WaitForFollowers(TensorParallelSetup& tp) {
  if (tp.group == nullptr) return Status::Ok();
  const int64_t ready = tp.group->Sum(1);
  if (ready != tp.size) {
    return Unavailable(std::to_string(tp.size - ready) + " tensor-parallel ranks did not load");
  }
  RADIX_LOG_INFO("tensor-parallel: all {} ranks loaded their shards", tp.size);
  return Status::Ok();
}

}  // namespace radixserve
