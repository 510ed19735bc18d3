#include "api/score_api.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "api/api_error.h"
#include "api/embeddings_api.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/request_builder.h"
#include "api/serving.h"
#include "common/check.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// The request's scoring options, as parsed.
struct ScoreOptions {
  bool apply_softmax = false;
  double temperature = 1.0;
  bool return_token_logprobs = false;
  std::string model;
  // Label candidates of each item (one list per item after expanding a shared list).
  std::vector<std::vector<int32_t>> labels;
  // Multi-item scoring: the prompt tokens of the fused sequence SGLang would run (its usage).
  std::optional<int64_t> fused_prompt_tokens;
};

bool IsIdList(const json& v) {
  return v.is_array() &&
         std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); });
}

// SGLang's label checks: a non-empty list, or one non-empty list per item, of distinct
// non-negative in-vocabulary ids.
ApiExpected<std::vector<std::vector<int32_t>>> ReadLabels(const ServerContext& ctx,
                                                          const json& value, size_t num_items) {
  if (!value.is_array() || value.empty()) {
    return BadRequest("label_token_ids must be a nonempty list");
  }
  std::vector<json> lists;
  if (value[0].is_array()) {
    if (value.size() != num_items) return BadRequest("label_token_ids must have one list per item");
    lists.assign(value.begin(), value.end());
  } else {
    lists.assign(num_items, value);
  }
  std::vector<std::vector<int32_t>> out;
  for (const json& list : lists) {
    if (!list.is_array() || list.empty()) {
      return BadRequest("each item must have a nonempty candidate list");
    }
    std::vector<int32_t> ids;
    std::set<int64_t> seen;
    for (const json& token : list) {
      if (!token.is_number_integer() || token.get<int64_t>() < 0) {
        return BadRequest("label_token_ids must contain nonnegative integers");
      }
      const int64_t id = token.get<int64_t>();
      if (!seen.insert(id).second) {
        return BadRequest("label_token_ids must not contain duplicate tokens");
      }
      if (id >= ctx.model.vocab_size) {
        return BadRequest(fmt::format("Token ID {} is out of vocabulary (vocab size: {})", id,
                                      ctx.model.vocab_size));
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

ApiExpected<bool> ReadFlag(const json& body, std::string_view key) {
  RADIX_ASSIGN_OR_RETURN(std::optional<bool> flag, Field(ReadOptionalBool(body, key)));
  return flag.value_or(false);
}

// Scores of one item from its labels' logprobs (SGLang's _convert_logprobs_to_scores).
std::vector<double> ToScores(const std::vector<float>& logprobs, const ScoreOptions& options) {
  if (options.apply_softmax) return Softmax(logprobs, options.temperature);
  std::vector<double> scores(logprobs.begin(), logprobs.end());
  for (double& s : scores) s = std::exp(s);
  return scores;
}

// SGLang's ScoringResponse.
json ScoreResponse(const ScoreOptions& options, json scores, json token_logprobs,
                   int64_t prompt_tokens) {
  return {
      {"scores", std::move(scores)},
      {"pooled_hidden_states", nullptr},
      {"token_logprobs", options.return_token_logprobs ? std::move(token_logprobs) : json(nullptr)},
      {"model", options.model},
      {"usage",
       {{"prompt_tokens", prompt_tokens},
        {"total_tokens", prompt_tokens},
        {"completion_tokens", 0},
        {"prompt_tokens_details", nullptr}}},
      {"object", "scoring"}};
}

class LabelScores final : public ResponseFormatter {
 public:
  explicit LabelScores(LabelScoresAnswer answer) : answer_(std::move(answer)) {}

  // Label-scoring calls never stream.
  void StreamEvent(const ServerContext&, const std::vector<ChoiceState>&, size_t,
                   const engine::RequestEvent&, const Emit&) override {
    RADIX_CHECK_MSG(false, "a label-scoring call does not stream");
  }
  void StreamEnd(const ServerContext&, const std::vector<ChoiceState>&, const Emit&) override {
    RADIX_CHECK_MSG(false, "a label-scoring call does not stream");
  }

  FormattedResponse Complete(const ServerContext&,
                             const std::vector<ChoiceState>& choices) override {
    if (std::optional<ApiError> failed = FailedChoice(choices)) {
      return {failed->status, failed->OpenAiBody()};
    }
    std::vector<std::vector<float>> logprobs;
    int64_t prompt_tokens = 0;
    for (const ChoiceState& choice : choices) {
      prompt_tokens += choice.prompt_tokens;
      if (choice.output_logprobs.empty()) {
        // Only an abort without an error status ends a scoring request before its token.
        ApiError error{
            500, "The scoring request " + choice.rid + " ended before its scores.", {}, {}};
        return {error.status, error.OpenAiBody()};
      }
      logprobs.push_back(choice.output_logprobs[0].token_ids_logprobs);
    }
    return answer_(logprobs, prompt_tokens);
  }

 private:
  LabelScoresAnswer answer_;
};

constexpr std::string_view kFields[] = {"query",
                                        "items",
                                        "label_token_ids",
                                        "apply_softmax",
                                        "temperature",
                                        "return_token_logprobs",
                                        "item_first",
                                        "model",
                                        "return_pooled_hidden_states",
                                        "score_extraction_token",
                                        "embed_override_token_id",
                                        "query_embed_overrides",
                                        "item_embed_overrides"};

// A parsed score call: one prompt per item (or, without items, the answer itself).
struct ScoreCall {
  ScoreOptions options;
  std::vector<PromptInput> prompts;
  std::optional<json> answer;
};

ApiExpected<ScoreCall> ParseScore(ServerContext& ctx, const std::string& body_text) {
  RADIX_ASSIGN_OR_RETURN(json parsed, ParseJsonObjectBody(body_text));
  const json& body = parsed;
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (std::find(std::begin(kFields), std::end(kFields), it.key()) == std::end(kFields)) {
      return BadRequest("Unsupported field '" + it.key() + "' in a /v1/score request.");
    }
  }
  for (const char* key : {"score_extraction_token", "embed_override_token_id",
                          "query_embed_overrides", "item_embed_overrides"}) {
    if (body.contains(key) && !body[key].is_null()) {
      return BadRequest(std::string(key) +
                        " is not supported by this server: it scores the "
                        "sequences' last tokens from their token ids.");
    }
  }
  ScoreOptions options;
  ApiExpected<bool> softmax = ReadFlag(body, "apply_softmax");
  ApiExpected<bool> token_logprobs = ReadFlag(body, "return_token_logprobs");
  ApiExpected<bool> item_first = ReadFlag(body, "item_first");
  ApiExpected<bool> pooled = ReadFlag(body, "return_pooled_hidden_states");
  for (const auto* flag : {&softmax, &token_logprobs, &item_first, &pooled}) {
    if (!flag->ok()) return flag->status();
  }
  options.apply_softmax = *softmax;
  options.return_token_logprobs = *token_logprobs;
  RADIX_ASSIGN_OR_RETURN(std::optional<std::string> model,
                         Field(ReadOptionalString(body, "model")));
  options.model = model.value_or("default");
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    const json& t = body["temperature"];
    if (!t.is_number() || !std::isfinite(t.get<double>()) || t.get<double>() <= 0) {
      return InvalidRequest("temperature must be a finite number greater than 0.");
    }
    options.temperature = t.get<double>();
  }
  if (options.temperature != 1.0 && !options.apply_softmax) {
    return BadRequest("temperature requires apply_softmax=True");
  }
  const bool generation = ctx.model.is_generation;
  const bool has_labels = body.contains("label_token_ids") && !body["label_token_ids"].is_null();
  if (generation && *pooled) {
    return BadRequest(
        "return_pooled_hidden_states is not supported for CausalLM models. It requires a model "
        "with a task-specific head (e.g. SequenceClassification or RewardModel).");
  }
  if (!generation && *pooled) {
    return BadRequest("return_pooled_hidden_states is not supported by this server.");
  }
  if (!generation && options.return_token_logprobs) {
    return BadRequest("return_token_logprobs is only supported for CausalLM models");
  }
  if (!generation && has_labels) {
    return BadRequest(
        "label_token_ids does not apply to a classification model: its scores are "
        "its class logits.");
  }
  if (generation && !has_labels) {
    return BadRequest("label_token_ids is required for generation (CausalLM) models.");
  }
  if (!body.contains("items") || body["items"].is_null()) {
    return BadRequest("items must be provided");
  }
  const json& items = body["items"];
  const bool text_items =
      items.is_string() ||
      (items.is_array() && !items.empty() &&
       std::all_of(items.begin(), items.end(), [](const json& e) { return e.is_string(); }));
  const bool id_items =
      items.is_array() && !items.empty() && std::all_of(items.begin(), items.end(), IsIdList);
  if (items.is_array() && items.empty()) {
    json empty = ScoreResponse(options, json::array(), json::array(), 0);
    return ScoreCall{std::move(options), {}, std::move(empty)};
  }
  const size_t num_items = items.is_string() ? 1 : items.size();
  if (generation) {
    RADIX_ASSIGN_OR_RETURN(options.labels, ReadLabels(ctx, body["label_token_ids"], num_items));
  }

  const json query = body.contains("query") && !body["query"].is_null()
                         ? body["query"]
                         : (id_items ? json::array() : json(""));
  const bool text_query = query.is_string();
  if (!((text_query && text_items) || (IsIdList(query) && id_items))) {
    return BadRequest(
        "Invalid combination of query/items types for score_request: query and "
        "items must both be text or both be token ids.");
  }
  if ((text_query || text_items) && ctx.tokenizer == nullptr) {
    return BadRequest("The tokenizer is not initialized (--skip-tokenizer-init): send token ids.");
  }
  std::vector<json> item_values =
      items.is_string() ? std::vector<json>{items} : std::vector<json>(items.begin(), items.end());

  // Each item's prompt: text (tokenized whole) or ids.
  std::vector<PromptInput> prompts;
  const std::optional<int64_t> delimiter =
      ctx.args->GetOptionalInt(args::key::kMultiItemScoringDelimiter);
  if (delimiter && !generation) {
    return BadRequest(
        "Multi-item scoring (--multi-item-scoring-delimiter) needs a causal LM here; "
        "score a classification model's items one by one.");
  }
  if (delimiter) {
    if (*item_first) {
      return BadRequest(
          "item_first is not supported with multi-item scoring "
          "(--multi-item-scoring-delimiter): items always follow the query.");
    }
    if (*delimiter < 0 || *delimiter >= ctx.model.vocab_size) {
      return BadRequest(
          fmt::format("--multi-item-scoring-delimiter {} is outside the vocabulary "
                      "(size {}).",
                      *delimiter, ctx.model.vocab_size));
    }
    auto ids_of = [&](const json& v, bool special) -> Expected<std::vector<int32_t>> {
      if (!v.is_string()) return ReadTokenIds(v, "items", ctx.model.vocab_size);
      auto ids = ctx.tokenizer->Encode(v.get<std::string>(),
                                       {.add_special_tokens = special, .parse_special = true});
      return std::vector<int32_t>(ids.begin(), ids.end());
    };
    RADIX_ASSIGN_OR_RETURN(std::vector<int32_t> query_ids, Field(ids_of(query, true)));
    int64_t fused = static_cast<int64_t>(query_ids.size()) + 1;
    for (const json& item : item_values) {
      RADIX_ASSIGN_OR_RETURN(std::vector<int32_t> item_ids, Field(ids_of(item, false)));
      std::vector<int32_t> ids = query_ids;
      ids.push_back(static_cast<int32_t>(*delimiter));
      ids.insert(ids.end(), item_ids.begin(), item_ids.end());
      fused += static_cast<int64_t>(item_ids.size()) + 1;
      prompts.push_back({std::nullopt, std::move(ids)});
    }
    options.fused_prompt_tokens = fused;
  } else if (text_query) {
    const std::string q = query.get<std::string>();
    for (const json& item : item_values) {
      const std::string it = item.get<std::string>();
      prompts.push_back({*item_first ? it + q : q + it, std::nullopt});
    }
  } else {
    RADIX_ASSIGN_OR_RETURN(std::vector<int32_t> query_ids,
                           Field(ReadTokenIds(query, "query", ctx.model.vocab_size)));
    for (const json& item : item_values) {
      RADIX_ASSIGN_OR_RETURN(std::vector<int32_t> item_ids,
                             Field(ReadTokenIds(item, "items", ctx.model.vocab_size)));
      std::vector<int32_t> ids = *item_first ? item_ids : query_ids;
      const std::vector<int32_t>& tail = *item_first ? query_ids : item_ids;
      ids.insert(ids.end(), tail.begin(), tail.end());
      prompts.push_back({std::nullopt, std::move(ids)});
    }
  }

  return ScoreCall{std::move(options), std::move(prompts), std::nullopt};
}

// A causal LM: each item's labels as its next token.
ApiExpected<ServingPlan> PlanLabelScores(ServerContext& ctx, ScoreCall call) {
  const std::string base = "score-" + std::to_string(ctx.next_rid.fetch_add(1));
  ServingPlan plan;
  for (size_t i = 0; i < call.prompts.size(); ++i) {
    RADIX_ASSIGN_OR_RETURN(engine::GenerateRequest request,
                           BuildLabelScoringRequest(ctx, call.prompts[i], call.options.labels[i],
                                                    base + "-" + std::to_string(i)));
    plan.requests.push_back(std::move(request));
  }
  plan.formatter = LabelScoresFormatter(
      [options = std::move(call.options)](const std::vector<std::vector<float>>& logprobs,
                                          int64_t prompt_tokens) -> FormattedResponse {
        json scores = json::array();
        for (size_t i = 0; i < logprobs.size(); ++i) {
          RADIX_CHECK(logprobs[i].size() == options.labels[i].size());
          scores.push_back(ToScores(logprobs[i], options));
        }
        return {200, ScoreResponse(options, std::move(scores), logprobs,
                                   options.fused_prompt_tokens.value_or(prompt_tokens))};
      });
  return plan;
}

// A classification model (SGLang's SequenceClassification scoring): each item's class logits,
// or their softmax (over temperature).
void RunClassifierScores(ServerContext& ctx, ScoreCall call, ResponseWriterPtr writer) {
  if (ctx.model.labels.empty()) {
    return SendResult(*writer, WrongServerKind(false));
  }
  std::vector<EmbedInput> inputs;
  for (const PromptInput& prompt : call.prompts) {
    EmbedInput in;
    if (prompt.ids) {
      in.ids = *prompt.ids;
    } else {
      const auto ids = ctx.tokenizer->Encode(*prompt.text, {});
      in.ids.assign(ids.begin(), ids.end());
      in.from_text = true;
    }
    inputs.push_back(std::move(in));
  }
  if (Status fit = FitContext(ctx, inputs); !fit.ok()) return SendResult(*writer, FromStatus(fit));
  const std::string base = "score-" + std::to_string(ctx.next_rid.fetch_add(1));
  RunEmbedCall(
      ctx, base, std::move(inputs), writer, false,
      [writer, options = std::move(call.options)](std::vector<engine::EmbedResult>& results,
                                                  double) {
        json scores = json::array();
        int64_t tokens = 0;
        for (const engine::EmbedResult& r : results) {
          scores.push_back(options.apply_softmax
                               ? Softmax(r.embedding, options.temperature)
                               : std::vector<double>(r.embedding.begin(), r.embedding.end()));
          tokens += r.prompt_tokens;
        }
        writer->Send(200, "application/json",
                     ToJsonText(ScoreResponse(options, std::move(scores), nullptr, tokens)));
      });
}

}  // namespace

std::vector<double> Softmax(std::span<const float> values, double temperature) {
  std::vector<double> out(values.begin(), values.end());
  if (out.empty()) return out;
  const double top = *std::max_element(out.begin(), out.end());
  double sum = 0.0;
  for (double& v : out) sum += v = std::exp((v - top) / temperature);
  for (double& v : out) v /= sum;
  return out;
}

std::shared_ptr<ResponseFormatter> LabelScoresFormatter(LabelScoresAnswer answer) {
  return std::make_shared<LabelScores>(std::move(answer));
}

ApiExpected<engine::GenerateRequest> BuildLabelScoringRequest(const ServerContext& ctx,
                                                              const PromptInput& prompt,
                                                              const std::vector<int32_t>& labels,
                                                              std::string rid) {
  // One greedy token, its distribution read before any penalty could shape it.
  static const json kSampling{{"max_new_tokens", 1},       {"temperature", 0.0},
                              {"repetition_penalty", 1.0}, {"frequency_penalty", 0.0},
                              {"presence_penalty", 0.0},   {"min_new_tokens", 0}};
  BuildOptions build;
  build.rid = std::move(rid);
  build.return_logprob = true;
  build.token_ids_logprob = labels;
  BuiltRequest built = BuildGenerateRequest(ctx, prompt, kSampling, build);
  if (built.error) return *built.error;
  built.request->detokenize = false;
  return std::move(*built.request);
}

void HandleScore(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  if (!ctx.model.is_generation && ctx.model.labels.empty()) {
    return SendResult(*writer, BadRequest("/v1/score needs a causal LM or a classification "
                                          "model; " +
                                          ctx.served_model_name + " is an embedding model."));
  }
  ApiExpected<ScoreCall> call = ParseScore(ctx, body);
  if (!call.ok()) return SendResult(*writer, call.status());
  if (call->answer) return SendResult(*writer, *call->answer);
  if (!ctx.model.is_generation) {
    return RunClassifierScores(ctx, std::move(call).value(), std::move(writer));
  }
  Serve(ctx, std::move(writer), ErrorStyle::kOpenAi, PlanLabelScores(ctx, std::move(call).value()));
}

}  // namespace radixserve::api
