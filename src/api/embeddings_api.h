// The embedding routes of an embedding server (--is-embedding, or an encoder model):
//   POST /v1/embeddings  OpenAI's shape: input as a string, a list of strings, a list of token ids
//                        or a list of token-id lists; encoding_format float | base64; usage.
//   POST /encode         SGLang's native EmbeddingReqInput: text or input_ids (one or a list);
//                        answers {"embedding", "meta_info"} (a list for a list).
//   POST /classify, POST /v1/classify   classifiers and reward models (below).
// Each input becomes one engine request (Engine::SubmitEmbed), so the inputs of one call and of
// concurrent calls batch together. An input longer than the context length is a 400, or is cut
// to it with --allow-auto-truncate (text keeps its final token, [SEP] for BERT). `dimensions`
// (Matryoshka truncation) is a 400: no model radixserve serves declares it.
// Both routes answer 400 naming --is-embedding on a generation server.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "engine/embed_request.h"

namespace radixserve::api {

void HandleEmbeddings(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);
void HandleEncode(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);
// POST /classify: SGLang's reward / classification route; its body and answer are /encode's (a
// classifier's "embedding" is its label logits, a reward model's its one score).
void HandleClassify(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);
// POST /v1/classify: SGLang's OpenAI-style classification: input as /v1/embeddings takes it;
// answers per input the softmax over the label logits ("probs"), the argmax's label
// (config.json id2label) and num_classes. 400 on an embedding (not classification) model.
void HandleV1Classify(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);
// POST /get_score: LightLLM's reward-model route (--use_reward_model): {"chat": text,
// "parameters": {...}} -> {"score", "prompt_tokens", "finish_reason": "length"}. As in LightLLM,
// sampling parameters do not apply to a score (the object is accepted, its values unused).
void HandleGetScore(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

// One input of an embedding call: its ids, its token types (a cross-encoder pair's segments;
// empty: all 0), and whether it came from text (text truncation keeps the final token).
struct EmbedInput {
  std::vector<int32_t> ids;
  std::vector<int32_t> token_type_ids;
  bool from_text = false;
};

// Over-long inputs: a 400 naming the context length, or (--allow-auto-truncate) cut to it,
// keeping the final token of an input that came from text ([SEP] for BERT).
Status FitContext(const ServerContext& ctx, std::vector<EmbedInput>& inputs);

// Submits every input to the engine as one EmbedRequest (rid `base`-i); `answer` runs (on the
// connection's strand, through writer->Post) with all results, in input order. A refused or
// failed input answers the call with its error instead (OpenAI body, or native with `native`);
// a disconnect aborts the call's requests.
void RunEmbedCall(ServerContext& ctx, const std::string& base, std::vector<EmbedInput> inputs,
                  ResponseWriterPtr writer, bool native,
                  std::function<void(std::vector<engine::EmbedResult>&, double)> answer);

// The 400 that generation routes answer on an embedding server (and embedding routes on a
// generation server), naming --is-embedding.
ApiError WrongServerKind(bool generation_route);

}  // namespace radixserve::api
