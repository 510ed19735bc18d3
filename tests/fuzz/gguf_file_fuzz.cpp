// libFuzzer target: GgufFile::Parse must return a value (ok or error) for any bytes, never crash,
// hang, or read out of bounds. Build and run with clang: tests/fuzz/build_and_run.sh.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using radixserve::model::GgufFile;
  using radixserve::model::MappedFile;
  auto file =
      GgufFile::Parse(MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
  if (file.ok()) {
    // Touch every tensor's first and last byte: the parser promised they are in bounds.
    volatile uint8_t sink = 0;
    for (const auto& t : file->tensors()) {
      if (t.bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.bytes - 1];
    }
    (void)sink;
  }
  return 0;
}
