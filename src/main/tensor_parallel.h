// Tensor- and pipeline-parallel launch, SGLang's convention: one command per node, each with the
// same --tp-size, --pp-size, --nnodes, --dist-init-addr and its own --node-rank. The model runs on
// tp-size x pp-size ranks, tp-size / nnodes x pp-size per node: this process is the node's first
// (global rank node_rank x ranks per node) and starts the others as child processes of the same
// binary and arguments (they learn their local rank and the rendezvous address from the
// environment, die with their parent, and ignore SIGINT, which the terminal sends the whole
// process group). Rank g is tensor-parallel rank g % tp-size of pipeline stage g / tp-size.
// Global rank 0 hosts the rendezvous store at --dist-init-addr (on one node, with none given, at a
// free loopback port) and serves HTTP; every other rank is a follower (dist/tp_model.h).
// --threads is the node's: split over its ranks.
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
  int rank = 0;  // in the world of every rank
  int size = 1;
  int tp_size = 1;
  int pp_size = 1;
  int ep_size = 1;  // --ep-size: expert-parallel blocks of the tensor-parallel ranks
  int threads = 0;  // compute threads of this rank
  std::unique_ptr<dist::TcpStoreServer> store_server;  // global rank 0's
  std::unique_ptr<dist::TcpStore> store;
  std::unique_ptr<dist::TpGroup> group;        // the world; null with one rank
  std::unique_ptr<dist::TpGroup> stage_group;  // this stage's tensor-parallel ranks (tp, pp > 1)
  std::unique_ptr<dist::GroupStageLink> link;  // with pp > 1
  int64_t max_micro_batch_size = 0;

  bool leader() const { return rank == 0; }
  // World rank g is tensor-parallel rank g % tp-size of pipeline stage g / tp-size.
  int tp_rank() const { return rank % tp_size; }
  int pp_rank() const { return rank / tp_size; }
  model::TensorShard shard() const {
    return {tp_rank(), tp_size,
            tp_size == 1             ? nullptr
            : stage_group != nullptr ? stage_group.get()
                                     : group.get(),
            ep_size};
  }
  model::PipelineStage stage() const {
    return {pp_rank(), pp_size, link.get(), max_micro_batch_size};
  }
};

// With one rank: rank 0 of 1, no group. Otherwise starts this node's other ranks and joins the
// groups (Unavailable when a rank cannot be reached within --dist-timeout).
Expected<TensorParallelSetup> SetUpTensorParallel(const args::ServerArgs& args, char** argv);

// A follower's life after setup: loads its shard (or stage), meets the others at the start barrier,
// runs the leader's steps. Returns the process exit status.
int RunFollowerRank(const args::ServerArgs& args, TensorParallelSetup& tp);

// The leader's start barrier, after its shard loaded: Unavailable unless every rank loaded.
Status WaitForFollowers(TensorParallelSetup& tp);

}  // namespace radixserve
