// LoadModel on an HF folder with sharded safetensors (model.safetensors.index.json) gives the
// same logits as the single-file folder; a truncated shard is an error naming the file; reading
// instead of mmap gives the same result.
#include "model/model_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "model/safetensors_file.h"

namespace radixserve::model {
namespace {

namespace fs = std::filesystem;
const std::string kStoriesHf = std::string(RADIX_SHARED_DIR) + "/models/stories260K/hf";

// Writes `tensors` as one safetensors file.
void WriteShard(const fs::path& path, const std::vector<const SafetensorsTensor*>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const SafetensorsTensor* t : tensors) {
    header[t->name] = {
        {"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes}}};
    offset += static_cast<uint64_t>(t->bytes);
  }
  const std::string text = header.dump();
  const uint64_t len = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const SafetensorsTensor* t : tensors) {
    out.write(reinterpret_cast<const char*>(t->data), t->bytes);
  }
}

std::vector<float> Logits(const LoadOptions& options) {
  auto lm = LoadModel(options);
  EXPECT_TRUE(lm.ok()) << lm.status().message();
  if (!lm.ok()) return {};
  const ModelConfig& c = lm.value()->config();
  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432};
  KvCacheBuffers kv(c.num_layers, 8, c.num_kv_heads, c.head_dim);
  std::vector<int32_t> slots(8);
  std::iota(slots.begin(), slots.end(), 0);
  ForwardBatch batch;
  batch.token_ids = tokens;
  for (int64_t i = 0; i < 6; ++i) {
    batch.positions.push_back(i);
    batch.logit_indices.push_back(i);
  }
  batch.sequences.push_back({0, 6, std::span<const int32_t>(slots)});
  std::vector<float> logits(static_cast<size_t>(6 * c.vocab_size));
  EXPECT_TRUE(lm.value()->Forward(batch, kv.view(), nullptr, logits.data()).ok());
  return logits;
}

TEST(ModelLoaderTest, ShardedSafetensorsMatchSingleFile) {
  auto source = SafetensorsFile::Open(kStoriesHf + "/model.safetensors", true);
  ASSERT_TRUE(source.ok());
  // One directory per process: a Release and a sanitizer run of this test may overlap.
  const fs::path dir =
      fs::temp_directory_path() / ("radix_sharded_stories_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kStoriesHf + "/config.json", dir / "config.json");
  std::vector<const SafetensorsTensor*> first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const SafetensorsTensor& t : source->tensors()) {
    const bool in_first = t.name.find("layers.3") == std::string::npos &&
                          t.name.find("layers.4") == std::string::npos;
    (in_first ? first : second).push_back(&t);
    weight_map[t.name] =
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  WriteShard(dir / "model-00001-of-00002.safetensors", first);
  WriteShard(dir / "model-00002-of-00002.safetensors", second);
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"weight_map", weight_map}}.dump();

  LoadOptions single;
  single.model_path = kStoriesHf;
  LoadOptions sharded;
  sharded.model_path = dir.string();
  sharded.disable_mmap = true;
  auto a = Logits(single);
  auto b = Logits(sharded);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]);

  // Truncate the second shard: the error names it.
  fs::resize_file(dir / "model-00002-of-00002.safetensors", 1000);
  auto broken = LoadModel(sharded);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("model-00002-of-00002.safetensors"), std::string::npos)
      << broken.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace radixserve::model
