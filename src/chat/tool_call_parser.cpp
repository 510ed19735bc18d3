#include "chat/tool_call_parser.h"

#include <algorithm>
#include <functional>
#include <map>

#include "chat/tool_call_format.h"

namespace radixserve::chat {
namespace {

using Factory = std::function<std::unique_ptr<ToolCallFormat>(ToolSet)>;

// SGLang's ToolCallParserEnum entries implemented here (aliases map to the same detector there).
const std::map<std::string, Factory, std::less<>>& Factories() {
  static const auto* factories = new std::map<std::string, Factory, std::less<>>{
      {"deepseekv3", MakeDeepSeekV3Format},
      {"deepseekv31", MakeDeepSeekV31Format},
      {"glm", MakeGlm45Format},
      {"glm45", MakeGlm45Format},
      {"gpt-oss", MakeGptOssFormat},
      {"hermes", MakeHermesFormat},
      {"kimi_k2", MakeKimiK2Format},
      {"llama3", MakeLlama3Format},
      {"mistral", MakeMistralFormat},
      {"nanbeige", MakeQwen3CoderFormat},
      {"pythonic", MakePythonicFormat},
      {"qwen", MakeQwen25Format},
      {"qwen25", MakeQwen25Format},
      {"qwen3_coder", MakeQwen3CoderFormat},
      {"step3", MakeStep3Format},
      {"step3p5", MakeQwen3CoderFormat},
  };
  return *factories;
}

}  // namespace

Expected<std::vector<ToolSpec>> ToolSpecsFromOpenAI(const Json& tools) {
  std::vector<ToolSpec> specs;
  if (tools.is_null()) return specs;
  if (!tools.is_array()) return InvalidArgument("tools must be a list");
  for (const Json& tool : tools) {
    if (!tool.is_object()) return InvalidArgument("each tool must be an object");
    if (tool.value("type", std::string("function")) != "function") continue;
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) return InvalidArgument("tool has no 'function'");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) {
      return InvalidArgument("tool function has no 'name'");
    }
    ToolSpec spec;
    spec.name = name->get<std::string>();
    if (auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
      spec.parameters = *params;
    }
    if (auto strict = fn->find("strict"); strict != fn->end() && strict->is_boolean()) {
      spec.strict = strict->get<bool>();
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

ToolCallStream::ToolCallStream(std::shared_ptr<const ToolCallFormat> format)
    : format_(std::move(format)) {}
ToolCallStream::~ToolCallStream() = default;
ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;
ToolCallStream& ToolCallStream::operator=(ToolCallStream&&) noexcept = default;

ToolCallStreamResult ToolCallStream::Feed(std::string_view delta) {
  if (finished_) return {};
  if (!format_) return ToolCallStreamResult{std::string(delta), {}};
  buffer_ += delta;
  return Emit(false);
}

ToolCallStreamResult ToolCallStream::Finish() {
  if (finished_ || !format_) return {};
  ToolCallStreamResult result = Emit(true);
  finished_ = true;
  return result;
}

ToolCallStreamResult ToolCallStream::Emit(bool at_end) {
  ToolCallScan scan = format_->ScanFrom(buffer_, at_end, state_);
  ToolCallStreamResult result;
  // A format's Scan only ever extends what it reported before; anything else would be a bug in
  // the format, and emitting nothing is the safe answer.
  if (scan.normal.size() > normal_sent_) {
    result.normal_text = scan.normal.substr(normal_sent_);
    normal_sent_ = scan.normal.size();
  }
  for (size_t i = 0; i < scan.calls.size(); ++i) {
    const ScannedCall& call = scan.calls[i];
    const int index = calls_settled_ + static_cast<int>(i);
    if (i >= args_sent_.size()) {
      result.calls.push_back(ToolCallDelta{index, call.name, ""});
      args_sent_.push_back(0);
    }
    if (call.arguments.size() > args_sent_[i]) {
      result.calls.push_back(
          ToolCallDelta{index, std::nullopt, call.arguments.substr(args_sent_[i])});
      args_sent_[i] = call.arguments.size();
    }
  }
  if (scan.settled_text > 0 && !at_end) {
    buffer_.erase(0, scan.settled_text);
    normal_sent_ -= scan.settled_normal;
    args_sent_.erase(args_sent_.begin(),
                     args_sent_.begin() + static_cast<std::ptrdiff_t>(scan.settled_calls));
    calls_settled_ += static_cast<int>(scan.settled_calls);
    state_ = scan.next_state;
  }
  return result;
}

ToolCallParser::ToolCallParser(std::string name, std::shared_ptr<const ToolCallFormat> format)
    : name_(std::move(name)), format_(std::move(format)) {}
ToolCallParser::~ToolCallParser() = default;

Expected<std::unique_ptr<ToolCallParser>> ToolCallParser::Create(std::string_view name,
                                                                 std::vector<ToolSpec> tools) {
  auto it = Factories().find(name);
  if (it == Factories().end()) {
    std::string valid;
    for (const auto& n : Names()) valid += (valid.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown tool-call parser '" + std::string(name) +
                           "'; valid parsers: " + valid);
  }
  std::shared_ptr<const ToolCallFormat> format = it->second(ToolSet(std::move(tools)));
  return std::unique_ptr<ToolCallParser>(new ToolCallParser(std::string(name), std::move(format)));
}

const std::vector<std::string>& ToolCallParser::Names() {
  static const auto* names = [] {
    auto* list = new std::vector<std::string>;
    for (const auto& [name, factory] : Factories()) list->push_back(name);
    return list;
  }();
  return *names;
}

ToolCallParseResult ToolCallParser::Parse(std::string_view text) const {
  if (format_->tools().empty()) return ToolCallParseResult{std::string(text), {}};
  bool has_call = format_->HasToolCall(text);
  ToolCallParseResult result = format_->ParseComplete(text);
  if (result.calls.empty() && !has_call) return ToolCallParseResult{std::string(text), {}};
  for (size_t i = 0; i < result.calls.size(); ++i) result.calls[i].index = static_cast<int>(i);
  return result;
}

bool ToolCallParser::HasToolCall(std::string_view text) const {
  return !format_->tools().empty() && format_->HasToolCall(text);
}

std::optional<ToolCallStructure> ToolCallParser::StructureInfo(
    std::string_view function_name) const {
  return format_->Structure(function_name);
}

ToolCallStream ToolCallParser::NewStream() const {
  return ToolCallStream(format_->tools().empty() ? nullptr : format_);
}

}  // namespace radixserve::chat
