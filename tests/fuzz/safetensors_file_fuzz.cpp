// libFuzzer target: SafetensorsFile::Parse must return a value for any bytes, never crash.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using radixserve::model::MappedFile;
  using radixserve::model::SafetensorsFile;
  auto file = SafetensorsFile::Parse(
      MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
  if (file.ok()) {
    volatile uint8_t sink = 0;
    for (const auto& t : file->tensors()) {
      if (t.bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.bytes - 1];
    }
    (void)sink;
  }
  return 0;
}
