// The embedded chat page: every file of src/web/static/ is in the binary byte for byte, looked up
// by name only, with the right Content-Type, and the page references nothing off the server.
#include "web/web_asset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

namespace radixserve::web {
namespace {

const std::filesystem::path kStaticDir = std::filesystem::path(RADIX_SOURCE_DIR) / "src/web/static";

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(WebAsset, EveryStaticFileIsEmbeddedByteForByte) {
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(kStaticDir)) {
    if (!entry.is_regular_file()) continue;
    std::string name = entry.path().filename().string();
    on_disk.insert(name);
    const WebAsset* asset = FindAsset(name);
    ASSERT_NE(asset, nullptr) << name;
    EXPECT_EQ(asset->bytes, ReadFile(entry.path())) << name;
  }
  EXPECT_EQ(EmbeddedAssets().size(), on_disk.size());
  EXPECT_TRUE(on_disk.contains("index.html"));
}

TEST(WebAsset, TableIsSortedByName) {
  auto assets = EmbeddedAssets();
  for (size_t i = 1; i < assets.size(); ++i) EXPECT_LT(assets[i - 1].name, assets[i].name);
}

TEST(WebAsset, LooksUpPlainNamesOnly) {
  EXPECT_NE(FindAsset("chat.js"), nullptr);
  EXPECT_EQ(FindAsset("missing.js"), nullptr);
  EXPECT_EQ(FindAsset(""), nullptr);
  EXPECT_EQ(FindAsset("/chat.js"), nullptr);
  EXPECT_EQ(FindAsset("../CMakeLists.txt"), nullptr);
  EXPECT_EQ(FindAsset("static/chat.js"), nullptr);
}

TEST(WebAsset, ContentTypeByExtension) {
  EXPECT_EQ(ContentTypeFor("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("chat.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("chat.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("favicon.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("data.bin"), "application/octet-stream");
  EXPECT_EQ(ContentTypeFor("js"), "application/octet-stream");
}

TEST(WebAsset, EveryFileHasAKnownContentType) {
  for (const WebAsset& asset : EmbeddedAssets()) {
    EXPECT_NE(ContentTypeFor(asset.name), "application/octet-stream") << asset.name;
  }
}

// Works offline: every src= / href= of the page points at an embedded /static/ file.
TEST(WebAsset, IndexReferencesOnlyEmbeddedFiles) {
  const WebAsset* index = FindAsset("index.html");
  ASSERT_NE(index, nullptr);
  std::string html(index->bytes);
  std::regex reference(R"re(\b(?:src|href)="([^"]*)")re");
  int count = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), reference);
       it != std::sregex_iterator(); ++it) {
    std::string target = (*it)[1];
    ASSERT_TRUE(target.starts_with("/static/")) << target;
    EXPECT_NE(FindAsset(target.substr(8)), nullptr) << target;
    ++count;
  }
  EXPECT_GE(count, 3);  // stylesheet, markdown.js, chat.js
}

}  // namespace
}  // namespace radixserve::web
