// The guard of issue 17: no argument marked as taking effect on cpu (cpu "yes" or "partial" in
// src/args/server_args.json) may be silently ignored. Each one is read somewhere in src/ outside
// src/args/ through its generated constant (key::kMaxRunningRequests), or its entry says
// "read_in": "args" with the reason (consumed by the parser or validation only). The test reads
// the data file and the sources themselves, so it does not depend on the generated code.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "max-running-requests" -> "kMaxRunningRequests", the rule src/args/gen_arg_table.py names the
// constants by.
std::string ConstantName(const std::string& name) {
  std::string out = "k";
  bool upper = true;
  for (char c : name) {
    if (c == '-') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

struct Sources {
  fs::path root;        // the repository
  nlohmann::json data;  // src/args/server_args.json
  // Every .h/.cpp under src/ except src/args/, by path relative to the repository.
  std::vector<std::pair<std::string, std::string>> readers;
};

Sources LoadSources() {
  Sources sources;
  sources.root = RADIX_SOURCE_DIR;
  const fs::path data_path = sources.root / "src/args/server_args.json";
  // A missing checkout is a failure, not a skip: the guard must run.
  EXPECT_TRUE(fs::exists(data_path)) << data_path << " not found (RADIX_SOURCE_DIR)";
  if (!fs::exists(data_path)) return sources;
  sources.data = nlohmann::json::parse(ReadFile(data_path));
  const fs::path src = sources.root / "src";
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const fs::path relative = fs::relative(entry.path(), src);
    if (*relative.begin() == "args") continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cpp" && ext != ".cc") continue;
    sources.readers.emplace_back((fs::path("src") / relative).string(), ReadFile(entry.path()));
  }
  return sources;
}

// Files outside src/args/ that use `key::<constant>` (not followed by more identifier).
std::vector<std::string> FilesUsing(const Sources& sources, const std::string& constant) {
  const std::string needle = "key::" + constant;
  std::vector<std::string> files;
  for (const auto& [path, text] : sources.readers) {
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      const size_t end = at + needle.size();
      const unsigned char next = end < text.size() ? text[end] : ' ';
      if (!std::isalnum(next) && next != '_') {
        files.push_back(path);
        break;
      }
    }
  }
  return files;
}

TEST(ArgReaders, EverySupportedArgumentIsReadOutsideTheArgsFolder) {
  const Sources sources = LoadSources();
  ASSERT_TRUE(sources.data.is_object());
  ASSERT_GT(sources.readers.size(), 100u) << "src/ not found under " << sources.root;
  size_t supported = 0;
  std::vector<std::string> unread, stale_allowlist;
  for (const auto& group : sources.data.at("groups")) {
    for (const auto& arg : group.at("args")) {
      const std::string name = arg.at("name");
      if (arg.value("cpu", "yes") == "no") continue;
      ++supported;
      const bool allowlisted = arg.value("read_in", "") == "args";
      const bool read = !FilesUsing(sources, ConstantName(name)).empty();
      if (!read && !allowlisted) unread.push_back(name);
      if (read && allowlisted) stale_allowlist.push_back(name);
    }
  }
  EXPECT_GT(supported, 50u);
  EXPECT_TRUE(unread.empty())
      << "marked cpu yes/partial in src/args/server_args.json but no file outside src/args/ uses "
         "its key:: constant; read it, mark it \"cpu\": \"no\", or (consumed by the parser or "
         "validation only) give it \"read_in\": \"args\" with a read_in_why: "
      << nlohmann::json(unread).dump();
  EXPECT_TRUE(stale_allowlist.empty())
      << "these say \"read_in\": \"args\" but are read outside src/args/; drop read_in: "
      << nlohmann::json(stale_allowlist).dump();
}

// Outside src/args/, ServerArgs is read by key:: constant: a string literal would compile just as
// safely, but the guard above could not see the reader.
TEST(ArgReaders, ReadersOutsideTheArgsFolderUseKeyConstants) {
  const Sources sources = LoadSources();
  ASSERT_TRUE(sources.data.is_object());
  std::set<std::string> spellings;
  for (const auto& group : sources.data.at("groups")) {
    for (const auto& arg : group.at("args")) {
      std::string name = arg.at("name");
      spellings.insert(name);
      std::replace(name.begin(), name.end(), '-', '_');
      spellings.insert(name);
    }
  }
  const std::regex call(
      R"re(\b(Get|GetInt|GetFloat|GetBool|GetString|GetOptionalInt|GetOptionalFloat|)re"
      R"re(GetOptionalString|IsNull|IsExplicit|Set)\(\s*"([A-Za-z0-9_-]+)")re");
  std::vector<std::string> literal_reads;
  for (const auto& [path, text] : sources.readers) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call);
         it != std::sregex_iterator(); ++it) {
      if (spellings.count((*it)[2].str())) literal_reads.push_back(path + ": " + it->str());
    }
  }
  EXPECT_TRUE(literal_reads.empty()) << nlohmann::json(literal_reads).dump(1);
}

}  // namespace
