// POST /v1/score on a generation server: SGLang's scoring API for causal language models.
//
// A query and items (both text, or both token ids) become one sequence per item, query + item
// (item + query with item_first), and each item's scores are the probabilities of the
// label_token_ids as the next token after that sequence: exp(logprob), or with apply_softmax a
// softmax over the labels' logprobs divided by `temperature`. label_token_ids is one list shared
// by every item or one list per item. Text items are concatenated with the query as text and the
// whole prompt is tokenized once (special tokens added), as SGLang does.
//
// With --multi-item-scoring-delimiter D, SGLang's multi-item scoring: the query (special tokens
// added) and the items (without) are tokenized separately and item i is scored after
// query + [D] + item_i, attending to the query and itself only (never to the other items), which
// is what SGLang's one fused sequence query D item_1 D item_2 ... D with its per-item attention
// mask computes. Here each item is its own engine request; they batch in one prefill step.
//
// Each item is one engine request (prefill, one greedy token whose distribution is read, then
// done), so items of one call and of concurrent calls batch together. The answer is SGLang's
// ScoringResponse: {"scores": [[...] per item], "model", "usage", "object": "scoring"}, plus
// "token_logprobs" with return_token_logprobs. SGLang's request fields this server cannot honour
// (embedding overrides, score_extraction_token, return_pooled_hidden_states) answer 400 naming the
// field; unknown fields too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/api_error.h"
#include "api/request_builder.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "api/serving.h"
#include "engine/request.h"

namespace radixserve::api {

void HandleScore(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

// exp((v_i - max) / temperature) normalized: SGLang's softmax over scores (centered before
// scaling, so small temperatures do not overflow), in double precision.
std::vector<double> Softmax(std::span<const float> values, double temperature = 1.0);

// What a call of label-scoring requests (BuildLabelScoringRequest) answers, from each request's
// label logprobs (in its labels' order) and the calls' prompt tokens in total.
using LabelScoresAnswer = std::function<FormattedResponse(
    const std::vector<std::vector<float>>& label_logprobs, int64_t prompt_tokens)>;
// The formatter of such a (never streamed) call: a request that failed after admission answers
// its error, one that ended before its token a 500; otherwise `answer` shapes the reply.
std::shared_ptr<ResponseFormatter> LabelScoresFormatter(LabelScoresAnswer answer);

// The engine request that scores `labels` as the next token after `prompt` (text: tokenized with
// special tokens): one greedy token whose first output logprob entry carries the labels'
// logprobs (token_ids_logprobs, raw distribution), or the 400 to answer.
ApiExpected<engine::GenerateRequest> BuildLabelScoringRequest(const ServerContext& ctx,
                                                              const PromptInput& prompt,
                                                              const std::vector<int32_t>& labels,
                                                              std::string rid);

}  // namespace radixserve::api
