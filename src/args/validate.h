// Derived defaults and cross-argument rules, after SGLang's ServerArgs post-processing, adapted to
// the cpu device. Runs once, after parsing, before anything is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "args/server_args.h"
#include "common/machine.h"
#include "common/status.h"

namespace radixserve::args {

// Fills derived defaults (tokenizer path and served model name from the model path, a random
// seed, page size, chunked prefill size and mem_fraction_static from the machine's memory as
// SGLang derives them from device memory, CPU kernel backends, GGUF detection, deprecated
// flags mapped to their replacements) and checks ranges and incompatible combinations.
//
// Errors are InvalidArgument naming the argument ("argument --page-size: ..."); the caller exits
// with status 2. `warnings` receives one line per notice to log: each argument set to a
// non-default value that has no effect on the cpu device, each deprecated flag used, each value
// adjusted by a rule.
Status ResolveServerArgs(ServerArgs& args, const MachineInfo& machine,
                         std::vector<std::string>& warnings);

// The ranks the model is split over (src/main/tensor_parallel.h): --tp-size, except that with
// --enable-dp-attention the --dp-size attention replicas take the TP ranks, each a whole model
// (SGLang splits their MLPs over the TP ranks too; radixserve keeps each replica's MLP whole).
int64_t ModelSplitRanks(const ServerArgs& args);

// LightLLM's --first_token_constraint_mode reads the allowed first tokens from the
// FIRST_ALLOWED_TOKENS environment variable: comma-separated non-negative ids, at least one.
// The error names the flag.
Expected<std::vector<int32_t>> FirstAllowedTokens();

}  // namespace radixserve::args
