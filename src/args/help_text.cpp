#include "args/help_text.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "args/arg_names.h"
#include "args/arg_table.h"

namespace radixserve::args {
namespace {

std::string Metavar(const ArgSpec& spec) {
  if (spec.type == ArgType::kFlag) return "";
  if (!spec.choices.empty()) {
    std::string out = "{";
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      if (i) out += ',';
      out += spec.choices[i];
    }
    return out + "}";
  }
  std::string upper = ConfigKey(spec.name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  switch (spec.type) {
    case ArgType::kBool:
      return "{true,false}";
    case ArgType::kStringList:
    case ArgType::kIntList:
    case ArgType::kFloatList:
      return fmt::format("{0} [{0} ...]", upper);
    default:
      return upper;
  }
}

std::string DefaultText(const ArgSpec& spec) {
  if (spec.default_value == "null") return "None";
  return std::string(spec.default_value);
}

// Word-wraps `text` to `width` columns, every line prefixed by `indent`.
std::string Wrap(std::string_view text, size_t indent, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width - indent) {
      out.append(indent, ' ').append(line).append("\n");
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
    start = end + 1;
  }
  if (!line.empty()) out.append(indent, ' ').append(line).append("\n");
  return out;
}

std::string Spellings(const ArgSpec& spec, bool with_systems) {
  std::string out = "--" + std::string(spec.name);
  for (const AliasSpec& alias : spec.aliases) {
    out += ", --" + std::string(alias.name);
    if (with_systems && alias.system != spec.system) {
      out += fmt::format(" ({})", SystemName(alias.system));
    }
  }
  return out;
}

std::string MarkdownEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string RenderHelp() {
  std::string out =
      "usage: radixserve --model-path MODEL_PATH [options]\n\n"
      "An LLM serving engine for CPUs with SGLang's native API and the OpenAI API.\n"
      "Every argument also accepts '_' in place of '-'; values may be given as '--x v' or "
      "'--x=v'.\n\n"
      "  -h, --help            show this help and exit\n"
      "  --version             print the version and exit\n";
  std::map<std::string_view, std::vector<const ArgSpec*>> by_group;
  for (const ArgSpec& spec : AllArgs()) by_group[spec.group].push_back(&spec);
  for (std::string_view group_name : kGroupOrder) {
    auto it = by_group.find(group_name);
    if (it == by_group.end()) continue;
    out += fmt::format("\n{}:\n", group_name);
    for (const ArgSpec* spec : it->second) {
      std::string head = "  " + Spellings(*spec, /*with_systems=*/true);
      if (std::string metavar = Metavar(*spec); !metavar.empty()) head += " " + metavar;
      out += head + "\n";
      std::string body(spec->help);
      body += fmt::format(" (default: {})", DefaultText(*spec));
      if (spec->cpu != Support::kYes) {
        body += fmt::format(" [cpu: {}{}{}]", SupportName(spec->cpu),
                            spec->cpu_note.empty() ? "" : ": ", spec->cpu_note);
      }
      out += Wrap(body, 24, 100);
    }
  }
  return out;
}

std::string RenderServerArgsMarkdown() {
  size_t counts[3] = {0, 0, 0};
  size_t alias_count = 0;
  for (const ArgSpec& spec : AllArgs()) {
    ++counts[static_cast<int>(spec.cpu)];
    alias_count += spec.aliases.size();
  }
  std::string out = fmt::format(
      "# Server arguments\n\n"
      "<!-- Generated from src/args/server_args.json by `radix_args_doc`; do not edit by hand. "
      "Regenerate with `cmake --build <build> --target server_args_doc`. -->\n\n"
      "radixserve accepts every server argument of SGLang (the canonical names), and the arguments "
      "of LightLLM and RTP-LLM: as aliases where they mean the same as an SGLang argument, as "
      "arguments of their own otherwise. Dashes and underscores are interchangeable in every name. "
      "Arguments may also come from a YAML file given with `--config` (command-line values win). "
      "`radixserve --print-config ...` prints the resolved configuration as JSON without loading "
      "a model.\n\n"
      "The last column says whether the argument takes effect on the cpu device: **yes**, "
      "**partial** (the note says which part), or **no** (accepted, and one warning is logged "
      "when it is set).\n\n"
      "{} arguments ({} yes, {} partial, {} no) and {} aliases.\n\n",
      AllArgs().size(), counts[0], counts[1], counts[2], alias_count);
  std::map<std::string_view, std::vector<const ArgSpec*>> by_group;
  for (const ArgSpec& spec : AllArgs()) by_group[spec.group].push_back(&spec);
  for (std::string_view group_name : kGroupOrder) {
    auto it = by_group.find(group_name);
    if (it == by_group.end()) continue;
    out += fmt::format("## {}\n\n", group_name);
    out += "| Argument | Description | Default | Options | CPU |\n";
    out += "|---|---|---|---|---|\n";
    for (const ArgSpec* spec : it->second) {
      std::string names = fmt::format("`--{}`", spec->name);
      if (spec->system != System::kSglang) names += fmt::format(" ({})", SystemName(spec->system));
      for (const AliasSpec& alias : spec->aliases) {
        names += fmt::format("<br>`--{}` ({}{})", alias.name, SystemName(alias.system),
                             alias.deprecated ? ", deprecated" : "");
      }
      std::string options;
      if (!spec->choices.empty()) {
        for (size_t i = 0; i < spec->choices.size(); ++i) {
          options += fmt::format("{}`{}`", i ? ", " : "", spec->choices[i]);
        }
      } else {
        options = std::string(TypeName(spec->type));
        if (spec->append) options += " (one per occurrence)";
      }
      std::string cpu(SupportName(spec->cpu));
      if (!spec->cpu_note.empty()) cpu += ": " + std::string(spec->cpu_note);
      out += fmt::format("| {} | {} | `{}` | {} | {} |\n", names, MarkdownEscape(spec->help),
                         MarkdownEscape(DefaultText(*spec)), options, MarkdownEscape(cpu));
    }
    out += "\n";
  }
  return out;
}

}  // namespace radixserve::args
