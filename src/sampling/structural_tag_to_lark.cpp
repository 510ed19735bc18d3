#include "sampling/structural_tag_to_lark.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "sampling/json_schema_options.h"

namespace radixserve::sampling {
namespace {

using nlohmann::ordered_json;

struct Structure {
  std::string begin_rest;  // begin without its trigger
  std::string schema;      // JSON text, whitespace options applied
  std::string end;
};

// A Lark string literal (JSON syntax).
std::string LarkString(const std::string& text) { return ordered_json(text).dump(); }

// `text` as a regex matching itself: every byte that is not a letter or digit as \x{..}, so no
// character is special to the regex or to Lark's /.../ delimiters. Multi-byte UTF-8 stays raw.
std::string RegexLiteral(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c >= 0x80) {
      out += static_cast<char>(c);
    } else {
      char buf[12];
      std::snprintf(buf, sizeof(buf), "\\x{%X}", c);
      out += buf;
    }
  }
  return out;
}

Status Invalid(const std::string& what) { return InvalidArgument("structural_tag: " + what); }

}  // namespace

Expected<std::string> ConvertStructuralTagToLark(std::string_view structural_tag,
                                                 bool json_any_whitespace,
                                                 const std::string& json_whitespace_pattern) {
  const ordered_json tag = ordered_json::parse(structural_tag, nullptr, false);
  if (tag.is_discarded() || !tag.is_object()) return Invalid("not a JSON object");
  if (tag.contains("type") && tag["type"] != "structural_tag") {
    return Invalid("\"type\" must be \"structural_tag\"");
  }
  if (tag.contains("format")) {
    return Invalid("the \"format\" form is not supported; use \"structures\" and \"triggers\"");
  }
  const auto structures = tag.find("structures");
  const auto triggers = tag.find("triggers");
  if (structures == tag.end() || !structures->is_array() || structures->empty()) {
    return Invalid("\"structures\" must be a non-empty array");
  }
  if (triggers == tag.end() || !triggers->is_array() || triggers->empty()) {
    return Invalid("\"triggers\" must be a non-empty array");
  }
  std::vector<std::string> trigger_texts;
  for (const auto& t : *triggers) {
    if (!t.is_string() || t.get<std::string>().empty()) {
      return Invalid("each trigger must be a non-empty string");
    }
    trigger_texts.push_back(t.get<std::string>());
  }

  std::vector<std::vector<Structure>> by_trigger(trigger_texts.size());
  for (const auto& s : *structures) {
    if (!s.is_object() || !s.contains("begin") || !s["begin"].is_string() || !s.contains("end") ||
        !s["end"].is_string() || !s.contains("schema")) {
      return Invalid("each structure needs string \"begin\" and \"end\" and a \"schema\"");
    }
    const std::string begin = s["begin"].get<std::string>();
    size_t best = trigger_texts.size();
    for (size_t i = 0; i < trigger_texts.size(); ++i) {
      if (begin.rfind(trigger_texts[i], 0) == 0 &&
          (best == trigger_texts.size() || trigger_texts[i].size() > trigger_texts[best].size())) {
        best = i;
      }
    }
    if (best == trigger_texts.size()) {
      return Invalid("begin " + LarkString(begin) + " does not start with any trigger");
    }
    auto schema =
        WithJsonWhitespaceOptions(s["schema"].dump(), json_any_whitespace, json_whitespace_pattern);
    if (!schema.ok()) return Invalid(schema.status().message());
    by_trigger[best].push_back(
        {begin.substr(trigger_texts[best].size()), schema.value(), s["end"].get<std::string>()});
  }

  std::string any_trigger;
  for (const auto& t : trigger_texts) {
    if (!any_trigger.empty()) any_trigger += '|';
    any_trigger += RegexLiteral(t);
  }
  const std::string free_text = "/(?s:.*)/ & ~/(?s:.*(" + any_trigger + ").*)/";

  std::string lark = "start: seg* TAIL\nTAIL: " + free_text + "\nseg: ";
  std::string rules;
  bool first = true;
  for (size_t i = 0; i < trigger_texts.size(); ++i) {
    if (by_trigger[i].empty()) continue;
    const std::string n = std::to_string(i);
    if (!first) lark += " | ";
    first = false;
    lark += "pre_" + n + " tag_" + n;
    rules += "pre_" + n + "[suffix=" + LarkString(trigger_texts[i]) + "]: " + free_text + "\n";
    rules += "tag_" + n + ": ";
    for (size_t k = 0; k < by_trigger[i].size(); ++k) {
      const Structure& s = by_trigger[i][k];
      if (k > 0) rules += " | ";
      if (!s.begin_rest.empty()) rules += LarkString(s.begin_rest) + " ";
      rules += "%json " + s.schema;
      if (!s.end.empty()) rules += " " + LarkString(s.end);
    }
    rules += "\n";
  }
  return lark + "\n" + rules;
}

}  // namespace radixserve::sampling
