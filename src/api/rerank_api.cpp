#include "api/rerank_api.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <optional>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/embeddings_api.h"
#include "api/json_body.h"
#include "api/score_api.h"
#include "api/serving.h"
#include "chat/chat_template.h"
#include "common/check.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

struct RerankRequest {
  std::string query;
  std::vector<std::string> documents;
  std::optional<std::string> instruct;
  std::optional<int64_t> top_n;
  bool return_documents = true;
};

bool Blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// SGLang's V1RerankReqInput and _validate_request, with its messages.
ApiExpected<RerankRequest> ParseRerank(const std::string& body_text) {
  RADIX_ASSIGN_OR_RETURN(json parsed, ParseJsonObjectBody(body_text));
  const json& body = parsed;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (key != "query" && key != "documents" && key != "instruct" && key != "top_n" &&
        key != "return_documents" && key != "model") {
      return BadRequest("Unsupported field '" + key +
                        "' (supported: query, documents, instruct, top_n, return_documents, "
                        "model).");
    }
  }
  RerankRequest out;
  const json query = body.value("query", json());
  const json documents = body.value("documents", json());
  if (query.is_array() ||
      (documents.is_array() && std::any_of(documents.begin(), documents.end(),
                                           [](const json& d) { return d.is_array(); }))) {
    return BadRequest(
        "Multimodal rerank content (lists of content parts) is not supported: "
        "send the query and the documents as strings.");
  }
  if (query.is_null() || (query.is_string() && query.get<std::string>().empty())) {
    return BadRequest("Query cannot be empty");
  }
  if (!query.is_string()) return InvalidRequest("query must be a string.");
  out.query = query.get<std::string>();
  if (Blank(out.query)) return BadRequest("Query cannot be empty or whitespace only");
  if (!documents.is_array() || documents.empty()) {
    if (!documents.is_null() && !documents.is_array()) {
      return InvalidRequest("documents must be a list of strings.");
    }
    return BadRequest("Documents cannot be empty");
  }
  for (const json& doc : documents) {
    if (!doc.is_string() || doc.get<std::string>().empty()) {
      return BadRequest("Each document must be a non-empty string");
    }
    out.documents.push_back(doc.get<std::string>());
    if (Blank(out.documents.back())) {
      return BadRequest("Each document cannot be empty or whitespace only");
    }
  }
  if (body.contains("instruct") && !body["instruct"].is_null()) {
    if (!body["instruct"].is_string()) return InvalidRequest("instruct must be a string.");
    out.instruct = body["instruct"].get<std::string>();
  }
  if (body.contains("top_n") && !body["top_n"].is_null()) {
    if (!body["top_n"].is_number_integer()) return InvalidRequest("top_n must be an integer.");
    if (body["top_n"].get<int64_t>() < 1) {
      return InvalidRequest("Value error, parameter top_n should be larger than 0.");
    }
    out.top_n = body["top_n"].get<int64_t>();
  }
  if (body.contains("return_documents") && !body["return_documents"].is_null()) {
    if (!body["return_documents"].is_boolean()) {
      return InvalidRequest("return_documents must be a boolean.");
    }
    out.return_documents = body["return_documents"].get<bool>();
  }
  return out;
}

// The answer: documents by score, best first (ties keep their order), cut to top_n. `meta`: each
// document's meta_info (null when empty).
json RerankAnswer(const RerankRequest& request, const std::vector<double>& scores,
                  const std::vector<json>& meta = {}) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (request.top_n && static_cast<size_t>(*request.top_n) < order.size()) {
    order.resize(static_cast<size_t>(*request.top_n));
  }
  json out = json::array();
  for (size_t i : order) {
    json item{{"score", scores[i]}, {"index", i}, {"meta_info", meta.empty() ? json() : meta[i]}};
    if (request.return_documents) item["document"] = request.documents[i];
    out.push_back(std::move(item));
  }
  return out;
}

// An LLM reranker's chat template asks for a "yes" or "no" answer (SGLang's detection).
bool IsYesNoRerankerTemplate(const chat::ChatTemplate* chat_template) {
  if (chat_template == nullptr) return false;
  std::string t = chat_template->source();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t.find("answer can only be \"yes\" or \"no\"") != std::string::npos ||
         (t.find("answer can only be") != std::string::npos &&
          t.find("\"yes\"") != std::string::npos && t.find("\"no\"") != std::string::npos);
}

// The single tokens "yes" and "no" (as SGLang looks them up: the word's encoding, else the
// vocabulary entry).
std::optional<int32_t> WordToken(const tokenizer::Tokenizer& tok, std::string_view word) {
  const auto ids = tok.Encode(word, {.add_special_tokens = false, .parse_special = false});
  if (ids.size() == 1) return static_cast<int32_t>(ids[0]);
  if (auto id = tok.TokenToId(word)) return static_cast<int32_t>(*id);
  return std::nullopt;
}

ApiExpected<ServingPlan> PlanYesNoRerank(ServerContext& ctx, RerankRequest request) {
  if (!IsYesNoRerankerTemplate(ctx.chat_template)) {
    return BadRequest(
        "/v1/rerank on a generation model needs an LLM reranker's chat template (one that says "
        "the answer can only be \"yes\" or \"no\", as Qwen3-Reranker's does; give it with "
        "--chat-template), or serve a cross-encoder (*ForSequenceClassification).");
  }
  if (ctx.tokenizer == nullptr) {
    return BadRequest("/v1/rerank needs the tokenizer (--skip-tokenizer-init is set).");
  }
  const std::optional<int32_t> yes = WordToken(*ctx.tokenizer, "yes");
  const std::optional<int32_t> no = WordToken(*ctx.tokenizer, "no");
  if (!yes || !no) {
    return BadRequest("The tokenizer has no single \"yes\" and \"no\" tokens to score.");
  }
  const std::string base = "rerank-" + std::to_string(ctx.next_rid.fetch_add(1));
  ServingPlan plan;
  for (size_t i = 0; i < request.documents.size(); ++i) {
    chat::ChatRenderInput input;
    input.messages = chat::Json::array({{{"role", "user"}, {"content", request.query}},
                                        {{"role", "user"}, {"content", request.documents[i]}}});
    if (request.instruct) input.template_kwargs["instruct"] = *request.instruct;
    Expected<std::string> prompt = ctx.chat_template->Render(input);
    if (!prompt.ok()) return BadRequest(prompt.status().message());
    RADIX_ASSIGN_OR_RETURN(engine::GenerateRequest built,
                           BuildLabelScoringRequest(ctx, PromptInput{*prompt, std::nullopt},
                                                    {*yes, *no}, base + "-" + std::to_string(i)));
    plan.requests.push_back(std::move(built));
  }
  plan.formatter = LabelScoresFormatter(
      [request = std::move(request)](const std::vector<std::vector<float>>& logprobs,
                                     int64_t) -> FormattedResponse {
        std::vector<double> scores;
        for (const std::vector<float>& lp : logprobs) {
          RADIX_CHECK(lp.size() == 2);
          const double yes = std::exp(static_cast<double>(lp[0]));
          const double no = std::exp(static_cast<double>(lp[1]));
          scores.push_back(yes + no > 0.0 ? yes / (yes + no) : 0.0);
        }
        return {200, RerankAnswer(request, scores)};
      });
  return plan;
}

// A cross-encoder: each (query, document) pair through the classifier; the first logit (through
// the model's activation) is the score.
void RunCrossEncoderRerank(ServerContext& ctx, RerankRequest request, ResponseWriterPtr writer) {
  if (ctx.model.labels.empty()) {
    return SendResult(*writer,
                      BadRequest("/v1/rerank needs a cross-encoder (*ForSequenceClassification) "
                                 "or an LLM reranker; " +
                                 ctx.served_model_name + " is an embedding model."));
  }
  if (ctx.tokenizer == nullptr) {
    return SendResult(*writer, BadRequest("/v1/rerank needs the tokenizer (--skip-tokenizer-init "
                                          "is set)."));
  }
  std::vector<EmbedInput> inputs;
  for (const std::string& doc : request.documents) {
    tokenizer::PairEncoding pair = ctx.tokenizer->EncodePair(request.query, doc);
    inputs.push_back({.ids = std::vector<int32_t>(pair.ids.begin(), pair.ids.end()),
                      .token_type_ids = std::move(pair.type_ids),
                      .from_text = true});
  }
  if (Status fit = FitContext(ctx, inputs); !fit.ok()) {
    return SendResult(*writer, FromStatus(fit));
  }
  const std::string base = "rerank-" + std::to_string(ctx.next_rid.fetch_add(1));
  const bool sigmoid = ctx.model.sigmoid_scores;
  RunEmbedCall(ctx, base, std::move(inputs), writer, false,
               [writer, base, sigmoid, request = std::move(request)](
                   std::vector<engine::EmbedResult>& results, double seconds) {
                 std::vector<double> scores;
                 std::vector<json> meta;
                 for (size_t i = 0; i < results.size(); ++i) {
                   const double logit = results[i].embedding.at(0);
                   scores.push_back(sigmoid ? 1.0 / (1.0 + std::exp(-logit)) : logit);
                   meta.push_back({{"id", base + "-" + std::to_string(i)},
                                   {"prompt_tokens", results[i].prompt_tokens},
                                   {"e2e_latency", seconds}});
                 }
                 writer->Send(200, "application/json",
                              ToJsonText(RerankAnswer(request, scores, meta)));
               });
}

}  // namespace

void HandleRerank(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  ApiExpected<RerankRequest> request = ParseRerank(body);
  if (!request.ok()) return SendResult(*writer, request.status());
  if (ctx.model.is_generation) {
    return Serve(ctx, std::move(writer), ErrorStyle::kOpenAi,
                 PlanYesNoRerank(ctx, std::move(request).value()));
  }
  RunCrossEncoderRerank(ctx, std::move(request).value(), std::move(writer));
}

}  // namespace radixserve::api
