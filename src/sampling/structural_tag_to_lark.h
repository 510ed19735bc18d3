// ConvertStructuralTagToLark: SGLang's `structural_tag` constraint to llguidance Lark.
//
// Accepted (SGLang's structural tag, as its OpenAI response_format and sampling_params take it):
//   {"type": "structural_tag",                        ("type" optional)
//    "structures": [{"begin": "<function=f>", "schema": {...}, "end": "</function>"}, ...],
//    "triggers": ["<function="]}
// Meaning: the output is free text, except that each occurrence of a trigger must continue as one
// of the structures whose `begin` starts with that trigger: the rest of `begin`, a JSON value
// valid against `schema`, then `end`; free text follows. Free text never contains a trigger
// otherwise. Every structure's begin must start with some trigger (the longest one is used).
// Lark produced, per trigger i (free text as lazy llguidance gen rules):
//   start: seg* TAIL;  seg: pre_i tag_i | ...;  pre_i[suffix=trigger_i]: <text without triggers>
//   TAIL: <text without any trigger>;  tag_i: "<begin rest>" %json{schema} "<end>" | ...
// Each schema gets the same JSON whitespace options as a json_schema constraint.
// Not accepted (kInvalidArgument naming it): other shapes (e.g. the "format" form of newer
// xgrammar structural tags), empty triggers, a begin that starts with no trigger.
// Pure function; any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace radixserve::sampling {

Expected<std::string> ConvertStructuralTagToLark(std::string_view structural_tag,
                                                 bool json_any_whitespace,
                                                 const std::string& json_whitespace_pattern);

}  // namespace radixserve::sampling
