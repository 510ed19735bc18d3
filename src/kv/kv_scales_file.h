// KvScalesFile: SGLang's `--quantization-param-path` JSON, the per-layer scaling factors of an
// FP8 E4M3 KV cache (the format vLLM's and SGLang's `kv_cache_scales_loader` read):
//
//   {"model_type": "llama",                       // optional; must match the model when given
//    "kv_cache": {"dtype": "float8_e4m3fn",       // the only dtype the format defines
//                 "scaling_factor": {"0": {"0": 0.02, "1": 0.03, ...}}}}   // tp rank -> layer
//
// One factor per layer serves K and V alike (as in SGLang: k_scale = v_scale = factor); the cache
// holds value / factor. SGLang logs a warning and falls back to 1.0 when the file does not
// validate; radixserve refuses to start instead, naming the problem. Pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kv/kv_dtype.h"

namespace radixserve::kv {

// Reads `path` for a model with `num_layers` layers and HF `model_type`, for tensor-parallel
// rank `tp_rank` of `tp_size`. kInvalidArgument (message names --quantization-param-path) when
// the file is missing, not JSON, for another dtype, model type or TP size, lacks a layer, or
// holds a factor that is not a positive finite number.
Expected<KvScales> LoadKvScalesFile(const std::string& path, int32_t num_layers,
                                    std::string_view model_type, int32_t tp_rank = 0,
                                    int32_t tp_size = 1);

}  // namespace radixserve::kv
