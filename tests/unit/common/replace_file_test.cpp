#include "common/replace_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace radixserve {
namespace {

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ReplaceFileTest, WritesCreatesTheDirectoryAndReplacesWholeLeavingNoTemporary) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "replace_file_test" / "nested";
  std::filesystem::remove_all(dir.parent_path());
  const std::filesystem::path path = dir / "out.txt";
  ASSERT_TRUE(ReplaceFile(path, "first version, longer than the second"));
  EXPECT_EQ(Read(path), "first version, longer than the second");
  ASSERT_TRUE(ReplaceFile(path, std::string("second\0bytes", 12)));
  EXPECT_EQ(Read(path), std::string("second\0bytes", 12));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "out.txt");
    ++files;
  }
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir.parent_path());
}

TEST(ReplaceFileTest, FailsWhereTheDirectoryCannotBeMade) {
  // A regular file where a directory should be.
  const std::filesystem::path blocker =
      std::filesystem::path(::testing::TempDir()) / "replace_file_blocker";
  ASSERT_TRUE(ReplaceFile(blocker, "x"));
  EXPECT_FALSE(ReplaceFile(blocker / "sub" / "out.txt", "y"));
  EXPECT_EQ(Read(blocker), "x");
  std::filesystem::remove(blocker);
}

}  // namespace
}  // namespace radixserve
