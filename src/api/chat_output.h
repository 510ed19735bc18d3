// What the chat-shaped routes (/v1/chat/completions and /v1/responses) make of a choice's model
// text: the thinking split off by --reasoning-parser, the answer, and the tool calls
// --tool-call-parser finds in it, whole (a finished choice) or as stream deltas; and the chat
// logprob entries.
//
// Thread safety: one ChatOutput belongs to one call; its streaming state is used under the call
// tracker's lock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/call_tracker.h"
#include "api/openai_tools.h"
#include "api/server_context.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace radixserve::api {

// OpenAI's logprob entries of choice.output_logprobs[from..]: [{"token", "bytes", "logprob",
// "top_logprobs": [...]}, ...].
nlohmann::json ChatLogprobEntries(const ServerContext& ctx, const ChoiceState& choice, size_t from);

struct ChatOutput {
  ChatOutput(std::shared_ptr<const openai::ToolRequest> request,
             std::shared_ptr<const chat::ToolCallParser> tool_parser,
             std::shared_ptr<const chat::ReasoningParser> reasoning_parser, size_t choices);

  // One streamed text delta (or the end of the output, `delta` null) of choice `index`, as
  // chat deltas: {"reasoning_content"} first, then {"content"}, then {"tool_calls"}; `lp` (this
  // step's logprobs) rides on the first delta, or on an empty content delta when there is none.
  template <typename Send>
  void Stream(size_t index, const std::string* delta, nlohmann::json lp, Send& send) {
    std::string answer = delta != nullptr ? *delta : std::string();
    if (reasoning) {
      chat::ReasoningResult split = delta != nullptr ? reasoning_streams[index].Feed(*delta)
                                                     : reasoning_streams[index].Finish();
      if (!split.reasoning_text.empty()) {
        send({{"reasoning_content", std::move(split.reasoning_text)}}, std::move(lp));
        lp = nullptr;
      }
      answer = std::move(split.normal_text);
    }
    openai::ToolCallStreamer::Out out = streamers[index].Feed(answer);
    if (delta == nullptr) {
      openai::ToolCallStreamer::Out rest = streamers[index].Finish();
      out.content += rest.content;
      for (auto& call : rest.tool_calls) out.tool_calls.push_back(std::move(call));
    }
    if (!out.content.empty() || (out.tool_calls.empty() && !lp.is_null())) {
      send({{"content", std::move(out.content)}}, std::move(lp));
      lp = nullptr;
    }
    if (!out.tool_calls.empty()) send({{"tool_calls", std::move(out.tool_calls)}}, std::move(lp));
  }

  // The whole output of a finished choice: {"role": "assistant", "content", "reasoning_content",
  // "tool_calls"} (the last two null when there are none).
  nlohmann::json Message(const std::string& text) const;

  std::shared_ptr<const openai::ToolRequest> tools;
  std::shared_ptr<const chat::ToolCallParser> parser;
  std::shared_ptr<const chat::ReasoningParser> reasoning;  // null: no separation
  // One per choice.
  std::vector<openai::ToolCallStreamer> streamers;
  std::vector<chat::ReasoningStream> reasoning_streams;
};

}  // namespace radixserve::api
