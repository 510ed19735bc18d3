// MappedFile::DropPages: whole pages inside a range of the mapping leave the resident set and
// read back with the same bytes; partial pages, ranges outside the mapping and read-in files are
// left alone.
#include "model/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace radixserve::model {
namespace {

class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    path_ = (std::filesystem::temp_directory_path() /
             ("radix-mapped-file-" + std::to_string(::getpid()) + ".bin"))
                .string();
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Resident pages of [p, p + bytes) (mincore; p page-aligned).
size_t ResidentPages(const uint8_t* p, size_t bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<uint8_t*>(p), bytes, in.data()), 0);
  size_t count = 0;
  for (unsigned char c : in) count += c & 1;
  return count;
}

TEST(MappedFileTest, DroppedPagesReadBackTheSameBytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<uint8_t> bytes(8 * page);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
  TempFile file(bytes);
  auto mapped = MappedFile::Open(file.path(), /*use_mmap=*/true);
  ASSERT_TRUE(mapped.ok());
  const uint8_t* data = mapped->data();
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < bytes.size(); i += page) sink = sink + data[i];  // fault every page in
  ASSERT_EQ(ResidentPages(data, bytes.size()), 8u);

  // From the middle of page 1 to the middle of page 6: pages 2..5 are whole inside.
  EXPECT_EQ(mapped->DropPages(data + page + page / 2, 5 * page), 4 * page);
  // Reads give the file's bytes again (faulted back in from the page cache).
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(data[i], bytes[i]) << i;

  EXPECT_EQ(mapped->DropPages(data + 10, page - 20), 0u);          // no whole page
  EXPECT_EQ(mapped->DropPages(data + 4 * page, 5 * page), 0u);     // runs past the end
  EXPECT_EQ(mapped->DropPages(bytes.data(), page * 2), 0u);        // not in the mapping
  EXPECT_EQ(mapped->DropPages(data, bytes.size()), bytes.size());  // the whole file

  auto read_in = MappedFile::Open(file.path(), /*use_mmap=*/false);
  ASSERT_TRUE(read_in.ok());
  EXPECT_EQ(read_in->DropPages(read_in->data(), bytes.size()), 0u);  // heap bytes stay
  EXPECT_EQ(read_in->data()[page], bytes[page]);
}

}  // namespace
}  // namespace radixserve::model
