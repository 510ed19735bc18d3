#include "api/request_log.h"

#include "api/python_repr.h"
#include "common/log.h"

namespace radixserve::api {

namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string> kMetadataOnlySkip = {"text",           "input_ids",  "input_embeds",
                                                 "image_data",     "audio_data", "lora_path",
                                                 "sampling_params"};
const std::set<std::string> kOutputSkip = {"text", "output_ids", "embedding"};

Json SamplingJson(const sampling::SamplingParams& p) {
  Json out = Json::object();
  out["max_new_tokens"] = p.max_new_tokens ? Json(*p.max_new_tokens) : Json(nullptr);
  out["stop"] = p.stop;
  out["stop_token_ids"] = p.stop_token_ids;
  out["temperature"] = p.temperature;
  out["top_p"] = p.top_p;
  out["top_k"] = p.top_k;
  out["min_p"] = p.min_p;
  out["frequency_penalty"] = p.frequency_penalty;
  out["presence_penalty"] = p.presence_penalty;
  out["repetition_penalty"] = p.repetition_penalty;
  out["min_new_tokens"] = p.min_new_tokens;
  out["n"] = p.n;
  out["ignore_eos"] = p.ignore_eos;
  out["skip_special_tokens"] = p.skip_special_tokens;
  out["no_stop_trim"] = p.no_stop_trim;
  if (p.json_schema) out["json_schema"] = *p.json_schema;
  if (p.regex) out["regex"] = *p.regex;
  if (p.ebnf) out["ebnf"] = *p.ebnf;
  if (p.sampling_seed) out["sampling_seed"] = *p.sampling_seed;
  return out;
}

Json FinishReason(const ChoiceState& choice) {
  if (!choice.finish) return nullptr;
  const engine::FinishReason& reason = *choice.finish;
  switch (reason.kind) {
    case engine::FinishKind::kStop: {
      Json matched = nullptr;
      if (reason.matched_str) matched = *reason.matched_str;
      if (reason.matched_token) matched = *reason.matched_token;
      return Json{{"type", "stop"}, {"matched", matched}};
    }
    case engine::FinishKind::kLength:
      return Json{{"type", "length"}, {"length", choice.completion_tokens}};
    case engine::FinishKind::kAbort: {
      Json out = {{"type", "abort"}, {"message", reason.message}};
      if (reason.status_code) out["status_code"] = reason.status_code;
      return out;
    }
  }
  return nullptr;
}

}  // namespace

RequestLog::RequestLog(int level) : level_(level) {
  if (level <= 1) {
    max_length_ = std::size_t{1} << 30;
    obj_skip_ = kMetadataOnlySkip;
    if (level == 1) obj_skip_.erase("sampling_params");
    out_skip_ = kOutputSkip;
  } else if (level == 2) {
    max_length_ = 2048;
  } else {
    max_length_ = std::size_t{1} << 30;
  }
}

std::string RequestLog::ReceiveLine(const Json& obj) const {
  return "Receive: obj=" + PyDataclassRepr("GenerateReqInput", obj, max_length_, obj_skip_);
}

std::string RequestLog::FinishLine(const Json& obj, const Json& out) const {
  return "Finish: obj=" + PyDataclassRepr("GenerateReqInput", obj, max_length_, obj_skip_) +
         ", out=" + PyReprTruncated(out, max_length_, out_skip_);
}

void RequestLog::LogReceive(const Json& obj) const { RADIX_LOG_INFO("{}", ReceiveLine(obj)); }

void RequestLog::LogFinish(const Json& obj, const Json& out) const {
  RADIX_LOG_INFO("{}", FinishLine(obj, out));
}

Json RequestObjJson(const ServerContext& ctx, const engine::GenerateRequest& req) {
  Json obj = Json::object();
  obj["text"] = nullptr;
  if (ctx.tokenizer != nullptr)
    obj["text"] = ctx.tokenizer->Decode(req.input_ids, {.skip_special_tokens = false});
  obj["input_ids"] = req.input_ids;
  obj["sampling_params"] = SamplingJson(req.sampling);
  obj["return_logprob"] = req.return_logprob;
  obj["logprob_start_len"] = req.logprob_start_len;
  obj["top_logprobs_num"] = req.top_logprobs_num;
  obj["token_ids_logprob"] =
      req.token_ids_logprob.empty() ? Json(nullptr) : Json(req.token_ids_logprob);
  obj["return_text_in_logprobs"] = req.return_text_in_logprobs;
  obj["stream"] = req.stream;
  obj["priority"] = req.priority ? Json(*req.priority) : Json(nullptr);
  obj["rid"] = req.rid;
  return obj;
}

Json RequestOutJson(const ChoiceState& choice) {
  Json meta = {{"id", choice.rid},
               {"finish_reason", FinishReason(choice)},
               {"prompt_tokens", choice.prompt_tokens},
               {"completion_tokens", choice.completion_tokens},
               {"cached_tokens", choice.cached_tokens},
               {"e2e_latency", choice.e2e_latency_s}};
  return Json{{"text", choice.text}, {"output_ids", choice.output_ids}, {"meta_info", meta}};
}

}  // namespace radixserve::api
