#include "main/tensor_parallel.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gloo/rendezvous/prefix_store.h>

#include "args/validate.h"
#include "common/log.h"
#include "dist/tp_model.h"
#include "main/expert_placement_args.h"
#include "main/model_assets.h"
#include "model/model_loader.h"

namespace radixserve {
namespace {

namespace key = args::key;

// Set for the ranks a node's first process starts.
constexpr const char* kLocalRankEnv = "RADIXSERVE_TP_LOCAL_RANK";
constexpr const char* kStoreEnv = "RADIXSERVE_TP_STORE";

// Parses a sysfs CPU list ("0-3,8,10-11").
std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream in(list);
  std::string range;
  while (std::getline(in, range, ',')) {
    if (range.empty() || range == "\n") continue;
    const size_t dash = range.find('-');
    const int first = std::atoi(range.substr(0, dash).c_str());
    const int last = dash == std::string::npos ? first : std::atoi(range.substr(dash + 1).c_str());
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

// --numa-node: this process (its threads start later) runs on `node`'s CPUs and allocates from
// its memory, as SGLang binds each subprocess.
Status BindToNumaNode(int64_t node) {
  const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist";
  std::ifstream file(path);
  std::string list;
  if (node < 0 || node >= 1024 || !std::getline(file, list)) {
    return InvalidArgument("argument --numa-node: this machine has no NUMA node " +
                           std::to_string(node) + " (no " + path + ")");
  }
  const std::vector<int> cpus = ParseCpuList(list);
  if (cpus.empty()) {
    return InvalidArgument("argument --numa-node: NUMA node " + std::to_string(node) +
                           " has no CPUs");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Unavailable("cannot bind to the CPUs of NUMA node " + std::to_string(node) + ": " +
                       std::strerror(errno));
  }
  std::array<unsigned long, 1024 / (8 * sizeof(unsigned long))> mask{};
  mask[static_cast<size_t>(node) / (8 * sizeof(unsigned long))] |=
      1UL << (static_cast<size_t>(node) % (8 * sizeof(unsigned long)));
  constexpr int kMpolBind = 2;  // <linux/mempolicy.h> MPOL_BIND
  if (syscall(SYS_set_mempolicy, kMpolBind, mask.data(), 1024) != 0) {
    return Unavailable("cannot bind to the memory of NUMA node " + std::to_string(node) + ": " +
                       std::strerror(errno));
  }
  RADIX_LOG_INFO("bound to NUMA node {} (CPUs {})", node, list);
  return Status::Ok();
}

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
  tp.tp_size = static_cast<int>(args::ModelSplitRanks(args));
  tp.pp_size = static_cast<int>(args.GetInt(key::kPpSize));
  tp.ep_size = static_cast<int>(args.GetInt(key::kEpSize));
  tp.size = tp.tp_size * tp.pp_size;
  tp.threads = static_cast<int>(args.GetInt(key::kThreads));
  tp.max_micro_batch_size = args.GetOptionalInt(key::kMaxMicroBatchSize).value_or(0);
  const int nnodes = static_cast<int>(args.GetInt(key::kNnodes));
  const int per_node = tp.size / nnodes;
  const char* local_env = std::getenv(kLocalRankEnv);
  const int local_rank = local_env != nullptr ? std::atoi(local_env) : 0;
  if (!args.IsNull(key::kNumaNode)) {
    // The i-th value binds this node's i-th rank.
    const nlohmann::json& nodes = args.Get(key::kNumaNode);
    if (nodes.size() < static_cast<size_t>(per_node)) {
      return InvalidArgument(fmt::format(
          "argument --numa-node: {} values for the {} ranks on this node (one per rank)",
          nodes.size(), per_node));
    }
    RADIX_RETURN_IF_ERROR(BindToNumaNode(nodes[static_cast<size_t>(local_rank)].get<int64_t>()));
  }
  if (tp.size == 1) return tp;
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
      "tensor-parallel rank {} of {} (tp rank {} of pipeline stage {} of {}; node {} of {}, {} "
      "threads): rendezvous at {}, timeout {} s",
      tp.rank, tp.size, tp.tp_rank(), tp.pp_rank(), tp.pp_size, args.GetInt(key::kNodeRank), nnodes,
      tp.threads, store_address, timeout.count());
  RADIX_ASSIGN_OR_RETURN(tp.store, dist::TcpStore::Connect(host, port, timeout));
  dist::TpGroupOptions options;
  options.rank = tp.rank;
  options.size = tp.size;
  options.timeout = timeout;
  // The world all-reduces only when it is the tensor-parallel group (no pipeline stages): through
  // shared memory on one node, in two levels over several.
  options.shared_memory = nnodes == 1 && tp.pp_size == 1;
  options.ranks_per_node = tp.pp_size == 1 ? per_node : 1;
  RADIX_ASSIGN_OR_RETURN(options.local_address, dist::LocalAddressToward(host, port));
  RADIX_ASSIGN_OR_RETURN(tp.group, dist::TpGroup::Connect(options, *tp.store));
  if (tp.pp_size > 1 && tp.tp_size > 1) {
    // This stage's tensor-parallel ranks: a group of their own, through the same store.
    const int stage = tp.pp_rank();
    gloo::rendezvous::PrefixStore stage_store("stage" + std::to_string(stage), *tp.store);
    dist::TpGroupOptions stage_options = options;
    stage_options.rank = tp.tp_rank();
    stage_options.size = tp.tp_size;
    // Shared memory when the stage's ranks share a node (ranks fill nodes in order), two levels
    // when they fill several nodes' whole blocks of ranks.
    stage_options.shared_memory =
        stage * tp.tp_size / per_node == ((stage + 1) * tp.tp_size - 1) / per_node;
    stage_options.ranks_per_node = tp.tp_size % per_node == 0 ? per_node : 1;
    RADIX_ASSIGN_OR_RETURN(tp.stage_group, dist::TpGroup::Connect(stage_options, stage_store));
  }
  if (tp.pp_size > 1) {
    tp.link = std::make_unique<dist::GroupStageLink>(tp.group.get(), tp.tp_size, tp.tp_rank());
  }
  const dist::TpGroup& reducer = tp.stage_group != nullptr ? *tp.stage_group : *tp.group;
  RADIX_LOG_INFO(
      "tensor-parallel rank {}: joined the group at {} ({})", tp.rank, options.local_address,
      tp.tp_size == 1           ? "no all-reduce: pipeline stages only"
      : reducer.shared_memory() ? "all-reduce over shared memory"
      : reducer.hierarchical()  ? "all-reduce over shared memory within the node, TCP between nodes"
                                : "all-reduce over TCP");
  return tp;
}

int RunFollowerRank(const args::ServerArgs& args, TensorParallelSetup& tp) {
  model::LoadOptions options = ModelLoadOptions(args, args.GetString(key::kModelPath));
  options.tensor_shard = tp.shard();
  options.pipeline_stage = tp.stage();
  auto placement = ExpertPlacementFromArgs(args);
  if (!placement.ok()) {
    RADIX_LOG_ERROR("tensor-parallel rank {}: {}", tp.rank, placement.status().message());
    return 1;
  }
  options.expert_placement = *std::move(placement);
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
