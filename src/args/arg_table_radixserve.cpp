// Arguments that radixserve adds on top of the systems it implements.
#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> RadixserveArgs() {
  return {
      {.name = "config",
       .type = ArgType::kString,
       .group = group::kRadixserve,
       .help = "Read arguments from this YAML file (keys in dash or underscore spelling). "
               "Arguments given on the command line override the file.",
       .system = System::kSglang},
      {.name = "print-config",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kRadixserve,
       .help = "Resolve and validate every argument, print the final configuration as JSON "
               "(the object /server_info returns) and exit without loading the model.",
       .system = System::kRadixserve},
      {.name = "max-n",
       .type = ArgType::kInt,
       .default_value = "128",
       .group = group::kRadixserve,
       .help = "Largest n (parallel samples; also best_of) one request may ask for. Larger "
               "values are refused with 400 before any work is done. OpenAI's own limit is 128.",
       .system = System::kRadixserve},
      {.name = "max-requests-per-call",
       .type = ArgType::kInt,
       .default_value = "4096",
       .group = group::kRadixserve,
       .help = "Largest number of generations one HTTP call may start: the prompts of a batch "
               "times n. Larger calls are refused with 400 before any prompt is tokenized.",
       .system = System::kRadixserve},
      {.name = "disable-grammar-jump-forward",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kRadixserve,
       .help = "Sample every token of a constrained request, even where the grammar forces the "
               "text. By default forced tokens (JSON keys, regex literals) are appended without a "
               "sampling step and computed in the next forward pass (SGLang's jump-forward); "
               "requests that return logprobs always sample every token.",
       .system = System::kRadixserve},
      {.name = "max-top-logprobs",
       .type = ArgType::kInt,
       .default_value = "100",
       .group = group::kRadixserve,
       .help = "Largest top_logprobs_num or number of token_ids_logprob ids (native), or "
               "top_logprobs / logprobs (OpenAI), a request may ask for; each one adds an entry "
               "at every logprob position.",
       .system = System::kRadixserve},
      {.name = "max-request-body-mb",
       .type = ArgType::kInt,
       .default_value = "32",
       .group = group::kRadixserve,
       .help = "Largest request body in MiB. A bigger body is refused with 413 before it is read "
               "and the connection is closed.",
       .system = System::kRadixserve},
      {.name = "max-buffered-body-mb",
       .type = ArgType::kInt,
       .default_value = "256",
       .group = group::kRadixserve,
       .help = "Largest sum, in MiB, of the request bodies all connections may hold at once (a "
               "declared Content-Length counts in full before the body arrives). A request that "
               "would exceed it is refused with 503 before its body is read, so many slow uploads "
               "cannot exhaust memory. Bodies up to 64 KiB are not counted, so large uploads "
               "cannot starve ordinary requests.",
       .system = System::kRadixserve},
      {.name = "shutdown-grace-period",
       .type = ArgType::kFloat,
       .default_value = "20.0",
       .group = group::kRadixserve,
       .help = "Seconds that requests in flight get to finish after SIGTERM/SIGINT. New requests "
               "are refused with 503 meanwhile; what is still running afterwards ends with an "
               "abort event and a complete response, then the process exits with status 0.",
       .system = System::kRadixserve},
      {.name = "allowed-origins",
       .type = ArgType::kStringList,
       .default_value = "[\"*\"]",
       .group = group::kRadixserve,
       .help = "Browser origins allowed by CORS. '*' (the default) lets any page read responses "
               "without credentials (no cookies); listed origins (e.g. https://app.example) are "
               "echoed back with credentials allowed, and other origins get no CORS headers.",
       .system = System::kRadixserve},
      {.name = "allowed-hosts",
       .type = ArgType::kStringList,
       .default_value = "[]",
       .group = group::kRadixserve,
       .help = "Host header values accepted when the server listens on a loopback address, besides "
               "localhost, 127.0.0.1 and [::1] (any port): a guard against DNS rebinding. '*' "
               "accepts any Host. No effect when listening on a non-loopback address.",
       .system = System::kRadixserve},
      {.name = "threads",
       .type = ArgType::kInt,
       .group = group::kRadixserve,
       .help = "Number of compute threads for the model's kernels. Default: every core this "
               "process may run on.",
       .system = System::kRadixserve},
  };
}

}  // namespace radixserve::args
