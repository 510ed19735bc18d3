#include "api/chat_output.h"

#include "api/openai_common.h"
#include "api/request_builder.h"

namespace radixserve::api {

using nlohmann::json;

json ChatLogprobEntries(const ServerContext& ctx, const ChoiceState& choice, size_t from) {
  json content = json::array();
  for (size_t i = from; i < choice.output_logprobs.size(); ++i) {
    const auto& info = choice.output_logprobs[i];
    std::string token = TokenText(ctx, info.token_id);
    json top = json::array();
    for (const auto& [id, lp] : info.top) {
      std::string alt = TokenText(ctx, id);
      top.push_back({{"token", alt}, {"bytes", openai::Bytes(alt)}, {"logprob", lp}});
    }
    content.push_back({{"token", token},
                       {"bytes", openai::Bytes(token)},
                       {"logprob", info.logprob},
                       {"top_logprobs", top}});
  }
  return content;
}

ChatOutput::ChatOutput(std::shared_ptr<const openai::ToolRequest> request,
                       std::shared_ptr<const chat::ToolCallParser> tool_parser,
                       std::shared_ptr<const chat::ReasoningParser> reasoning_parser,
                       size_t choices)
    : tools(std::move(request)),
      parser(std::move(tool_parser)),
      reasoning(std::move(reasoning_parser)) {
  streamers.reserve(choices);
  for (size_t i = 0; i < choices; ++i) {
    streamers.emplace_back(*tools, parser.get());
    if (reasoning) reasoning_streams.push_back(reasoning->NewStream());
  }
}

json ChatOutput::Message(const std::string& text) const {
  json reasoning_content = nullptr;
  std::string answer = text;
  if (reasoning) {
    chat::ReasoningResult split = reasoning->Parse(text);
    if (!split.reasoning_text.empty()) reasoning_content = std::move(split.reasoning_text);
    answer = std::move(split.normal_text);
  }
  openai::ToolCallAnswer calls = openai::ParseToolCalls(*tools, parser.get(), answer);
  return {{"role", "assistant"},
          {"content", std::move(calls.content)},
          {"reasoning_content", std::move(reasoning_content)},
          {"tool_calls", std::move(calls.tool_calls)}};
}

}  // namespace radixserve::api
