// LoadModel: resolves --model-path and --load-format to a checkpoint, builds ModelConfig and the
// architecture's CausalLM. The lead maps ServerArgs onto LoadOptions (src/model must not depend
// on src/args).
//
// model_path: an HF folder (config.json [+ generation_config.json] + model.safetensors or
// model.safetensors.index.json with shards), a .gguf file, or a folder holding exactly one .gguf.
// load_format: auto | safetensors | gguf | dummy (random weights from the config, seeded by
// random_seed); SGLang's other formats (pt, npcache, ...) are reported as not supported.
// dtype: auto | half | float16 | bfloat16 | float | float32. Activations are float32 on CPU (a
// 16-bit dtype logs a warning saying so). dtype sets the storage of dummy weights and of the
// checkpoint's unquantized weight matrices (F32/F16/BF16 converted at load, nearest even); auto
// keeps each tensor's stored format; norms, biases and block-quantized tensors never change.
// All failures are Status values naming the file (and tensor); nothing here aborts on input.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kernels/weight_format.h"
#include "model/causal_lm.h"
#include "model/encoder_model.h"

namespace radixserve::model {

struct LoadOptions {
  std::string model_path;
  std::string load_format = "auto";
  std::string dtype = "auto";
  int64_t context_length = 0;  // 0: the model's own
  std::string json_override;   // --json-model-override-args ("" or a JSON object)
  uint64_t random_seed = 0;
  bool disable_mmap = false;
  // GGUF block-quantized weights multiply activations rounded through Q8_0/Q8_1/Q8_K first, as
  // llama.cpp's CPU backend does (kernels::ActivationMode::kGgmlRounded; the fast int8 kernels
  // compute exactly that). true keeps float32 activations instead: the exact product with the
  // dequantized weights, what an HF copy of the weights computes (tests and tools).
  bool exact_quantized_activations = false;
  // This process's shard of a tensor-parallel model (tensor_shard.h); decoders only.
  TensorShard tensor_shard;
  // This process's pipeline stage (tensor_shard.h); decoders only.
  PipelineStage pipeline_stage;
  // Where the MoE layers' experts sit on the expert-parallel blocks (expert_placement.h).
  ExpertPlacementOptions expert_placement;
  // Also load the checkpoint's first multi-token-prediction block (DeepSeek-V3's NextN layer) for
  // CausalLM::ForwardMtp; InvalidArgument when it has none.
  bool load_mtp = false;
};

Expected<std::unique_ptr<CausalLM>> LoadModel(const LoadOptions& options);

// The float storage a --dtype value (or an HF torch_dtype) names: kF32 for float / float32, kF16
// for half / float16, kBF16 for bfloat16; nullopt for auto, "" and anything else.
std::optional<kernels::WeightFormat> DtypeFormat(std::string_view dtype);

// Encoder architectures (BERT, RoBERTa, XLM-RoBERTa) run through LoadEncoderModel, not LoadModel.
bool IsEncoderArchitecture(std::string_view architecture);
// An encoder with a sequence-classification head (a cross-encoder): BERT, RoBERTa, XLM-RoBERTa.
bool IsEncoderClassifier(std::string_view architecture);

// An encoder from an HF folder (safetensors, or dummy weights from its config.json), with the
// pooling its sentence-transformers files declare (CLS without normalization when the folder
// has no modules.json). Decoder architectures and GGUF files give Unsupported.
Expected<std::unique_ptr<EncoderModel>> LoadEncoderModel(const LoadOptions& options);

// Decoder checkpoints that only pool: *ForSequenceClassification (classifiers, reward models)
// and headless *Model folders (Qwen3Model, LlamaModel; BertModel is an encoder instead).
bool IsClassifierArchitecture(std::string_view architecture);
bool IsPoolingDecoderArchitecture(std::string_view architecture);

// A decoder served as an embedder or classifier (decoder_pooler.h): --is-embedding on a
// *ForCausalLM, or an architecture IsPoolingDecoderArchitecture names. The LM head is not loaded;
// a classifier reads its score head and config.json's id2label; an embedder pools as the folder's
// sentence-transformers files say, by the last token + L2 norm when it has none.
Expected<std::unique_ptr<EncoderModel>> LoadPoolingDecoder(const LoadOptions& options);

// The config alone (no weights): what LoadModel would use.
Expected<ModelConfig> LoadModelConfig(const LoadOptions& options);

}  // namespace radixserve::model
