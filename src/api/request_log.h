// RequestLog (--log-requests, --log-requests-level): SGLang's request log lines, written at INFO
//   Receive: obj=GenerateReqInput(text=..., input_ids=..., sampling_params={...}, ..., rid='...')
//   Finish: obj=GenerateReqInput(...), out={'text': ..., 'output_ids': [...], 'meta_info': {...}}
// once per engine request (each choice of an OpenAI call, each item of a /generate batch), when
// it is received and when it finishes. What the levels show, as in SGLang:
//   0: metadata only (no text, ids or sampling_params; out without text and output_ids)
//   1: + sampling_params
//   2: + inputs and outputs, strings and lists longer than 2048 cut to their first and last 1024
//   3: everything, uncut.
// RequestObjJson / RequestOutJson build the obj and out values (also what the crash dump stores).
//
// Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "api/call_tracker.h"
#include "api/server_context.h"
#include "engine/request.h"

namespace radixserve::api {

class RequestLog {
 public:
  // `level`: 0..3 (--log-requests-level; validated by the argument table).
  explicit RequestLog(int level);

  int level() const { return level_; }

  std::string ReceiveLine(const nlohmann::ordered_json& obj) const;
  std::string FinishLine(const nlohmann::ordered_json& obj,
                         const nlohmann::ordered_json& out) const;
  void LogReceive(const nlohmann::ordered_json& obj) const;
  void LogFinish(const nlohmann::ordered_json& obj, const nlohmann::ordered_json& out) const;

 private:
  int level_;
  std::size_t max_length_;
  std::set<std::string> obj_skip_;
  std::set<std::string> out_skip_;
};

// The request as SGLang's GenerateReqInput fields (text is the decoded prompt when a tokenizer
// is loaded).
nlohmann::ordered_json RequestObjJson(const ServerContext& ctx, const engine::GenerateRequest& req);
// What /generate would answer for a finished choice: text, output_ids, meta_info.
nlohmann::ordered_json RequestOutJson(const ChoiceState& choice);

}  // namespace radixserve::api
