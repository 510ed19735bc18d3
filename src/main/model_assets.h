// Loading what the server serves, from the resolved arguments: the model, its tokenizer, its chat
// template, and the facts the API reports about it. Called once by main before serving.
#pragma once

#include <memory>
#include <string>

#include "api/server_context.h"
#include "args/server_args.h"
#include "chat/chat_template.h"
#include "common/status.h"
#include "model/causal_lm.h"
#include "model/encoder_model.h"
#include "model/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace radixserve {

struct ModelAssets {
  std::shared_ptr<const model::CausalLM> model;  // null on an embedding server
  // --speculative-algorithm STANDALONE: the draft model (--speculative-draft-model-path), loaded
  // with the target's load options and context length; else null.
  std::shared_ptr<const model::CausalLM> draft_model;
  // The encoder of an embedding server (--is-embedding, or an encoder architecture); else null.
  std::shared_ptr<const model::EncoderModel> encoder;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;  // null with --skip-tokenizer-init
  std::unique_ptr<chat::ChatTemplate> chat_template;      // null: the model has none
  api::ModelFacts facts;
};

// The load options the server arguments give a checkpoint at `model_path` (--load-format,
// --dtype, --context-length, --json-model-override-args, ...): what LoadModelAssets loads with,
// and what a weight update reloads with.
model::LoadOptions ModelLoadOptions(const args::ServerArgs& args, const std::string& model_path);

// Errors name the file at fault; main prints them and exits with status 1. `shard` and `stage`:
// the tensor-parallel shard and pipeline stage the decoder loads as (the whole model by default).
Expected<ModelAssets> LoadModelAssets(const args::ServerArgs& args,
                                      const model::TensorShard& shard = {},
                                      const model::PipelineStage& stage = {});

}  // namespace radixserve
