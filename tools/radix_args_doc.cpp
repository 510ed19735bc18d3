// Tooling over the argument table:
//   radix_args_doc --write docs/server_args.md   writes the support matrix
//   radix_args_doc --check docs/server_args.md   exit 1 when the file on disk is stale
//   radix_args_doc --json                        the table as JSON (used by the test suite)
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "args/arg_table.h"
#include "args/help_text.h"

namespace {

nlohmann::json TableAsJson() {
  using namespace radixserve::args;
  nlohmann::json out = nlohmann::json::array();
  for (const ArgSpec& spec : AllArgs()) {
    nlohmann::json aliases = nlohmann::json::array();
    for (const AliasSpec& alias : spec.aliases) {
      aliases.push_back({{"name", alias.name},
                         {"system", SystemName(alias.system)},
                         {"deprecated", alias.deprecated}});
    }
    nlohmann::json choices = nlohmann::json::array();
    for (std::string_view choice : spec.choices) choices.push_back(choice);
    out.push_back({{"name", spec.name},
                   {"key", ConfigKey(spec.name)},
                   {"type", TypeName(spec.type)},
                   {"append", spec.append},
                   {"default", nlohmann::json::parse(spec.default_value)},
                   {"choices", choices},
                   {"group", spec.group},
                   {"cpu", SupportName(spec.cpu)},
                   {"system", SystemName(spec.system)},
                   {"aliases", aliases}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--json" && argc == 2) {
    std::cout << TableAsJson().dump(1) << "\n";
    return 0;
  }
  if (argc != 3 || (mode != "--write" && mode != "--check")) {
    std::cerr << "usage: radix_args_doc --write|--check docs/server_args.md | --json\n";
    return 2;
  }
  const std::string path = argv[2];
  const std::string text = radixserve::args::RenderServerArgsMarkdown();
  if (mode == "--write") {
    std::ofstream out(path);
    out << text;
    return out ? 0 : 1;
  }
  std::ifstream in(path);
  std::stringstream on_disk;
  on_disk << in.rdbuf();
  if (on_disk.str() != text) {
    std::cerr << path << " is stale: regenerate it with "
              << "`cmake --build <build dir> --target server_args_doc`\n";
    return 1;
  }
  return 0;
}
