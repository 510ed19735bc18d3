// The MoE layers' expert placement as the server arguments ask for it (--ep-num-redundant-experts,
// --ep-dispatch-algorithm, --init-expert-location, --enable-eplb and the --eplb-* family; see
// model/expert_placement.h). Every rank of a tensor-parallel group reads the same arguments and
// the same --init-expert-location file, so every rank places the experts alike.
#pragma once

#include "args/server_args.h"
#include "common/status.h"
#include "model/expert_placement.h"

namespace radixserve {

// InvalidArgument naming --init-expert-location when its file or JSON text cannot be read or holds
// neither a physical_to_logical_map nor a logical_count of the right nesting (the layer and
// expert counts are checked against the model when it loads).
Expected<model::ExpertPlacementOptions> ExpertPlacementFromArgs(const args::ServerArgs& args);

}  // namespace radixserve
