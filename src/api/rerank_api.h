// POST /v1/rerank (also PUT): SGLang's rerank route. {"query", "documents", "instruct",
// "top_n", "return_documents"} -> a list of {"score", "document" (with return_documents, the
// default), "index"} sorted by score, best first, cut to top_n.
//
// Two kinds of model rerank, as in SGLang:
//   - an LLM reranker on a generation server (Qwen3-Reranker style): the chat template asks for a
//     "yes" or "no" answer; each document's prompt is the template rendered with the messages
//     [query, document] as two user turns (and `instruct`), and its score is
//     p(yes) / (p(yes) + p(no)) for the next token (one engine request per document, batched);
//   - a cross-encoder on an embedding server (a *ForSequenceClassification checkpoint): each
//     (query, document) pair is tokenized as the tokenizer's pair template says and its score is
//     the classifier's first logit, through the activation config.json's
//     sbert_ce_default_activation_function names (Sigmoid or none).
// Other servers answer 400 saying what rerank needs. Multimodal content parts are refused.
#pragma once

#include <string>

#include "api/response_writer.h"
#include "api/server_context.h"

namespace radixserve::api {

void HandleRerank(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

}  // namespace radixserve::api
