// Tensor-parallel launch, SGLang's convention: one command per node, each with the same
// --tp-size, --nnodes, --dist-init-addr and its own --node-rank. A node runs tp-size / nnodes
// ranks: this process is the node's first (global rank node_rank * tp-size / nnodes) and starts
// the others as child processes of the same binary and arguments (they learn their local rank
// and the rendezvous address from the environment, die with their parent, and ignore SIGINT, which
// the terminal sends the whole process group). Global rank 0 hosts the rendezvous store at
// --dist-init-addr (on one node, with none given, at a free loopback port) and serves HTTP; every
// other rank is a follower (dist/tp_model.h). --threads is the node's: split over its ranks.
#pragma once

#include <memory>

#include "args/server_args.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "dist/tcp_store.h"
#include "dist/tp_group.h"
#include "model/tensor_shard.h"

namespace radixserve {

struct TensorParallelSetup {
  int rank = 0;
  int size = 1;
  int threads = 0;                                     // compute threads of this rank
  std::unique_ptr<dist::TcpStoreServer> store_server;  // global rank 0's
  std::unique_ptr<dist::TcpStore> store;
  std::unique_ptr<dist::TpGroup> group;  // null with --tp-size 1

  bool leader() const { return rank == 0; }
  model::TensorShard shard() const { return {rank, size, group.get()}; }
};

// With --tp-size 1: rank 0 of 1, no group. Otherwise starts this node's other ranks and joins the
// group (Unavailable when a rank cannot be reached within --dist-timeout).
Expected<TensorParallelSetup> SetUpTensorParallel(const args::ServerArgs& args, char** argv);

// A follower's life after setup: loads its shard, meets the others at the start barrier, runs the
// leader's steps. Returns the process exit status.
int RunFollowerRank(const args::ServerArgs& args, TensorParallelSetup& tp);

// The leader's start barrier, after its shard loaded: Unavailable unless every rank loaded.
Status WaitForFollowers(TensorParallelSetup& tp);

}  // namespace radixserve
