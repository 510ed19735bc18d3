#include "kv/kv_storage.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace radixserve::kv {
namespace {

TEST(KvStorageTest, BytesPerTokenFormula) {
  // 2 (K and V) * layers * heads * head_dim * element size.
  EXPECT_EQ(KvBytesPerToken(30, 3, 64, KvDtype::kBF16), 2u * 30 * 3 * 64 * 2);
  EXPECT_EQ(KvBytesPerToken(5, 8, 8, KvDtype::kF32), 2u * 5 * 8 * 8 * 4);
}

TEST(KvStorageTest, LayoutIsSlotMajorPerLayer) {
  KvStorageSpec spec{3, 2, 4, KvDtype::kF32, 10, {}};
  Expected<KvStorage> storage = KvStorage::Create(spec);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(storage->row_elements(), 8u);
  EXPECT_EQ(storage->row_bytes(), 32u);
  EXPECT_EQ(storage->k_bytes(), 3u * 10 * 32);

  std::vector<float> k(2 * 8), v(2 * 8);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i);
    v[i] = -static_cast<float>(i);
  }
  const int32_t slots[2] = {7, 3};
  storage->StoreKv(1, slots, k.data(), v.data());

  KvLayerView view = storage->layer(1);
  EXPECT_EQ(view.element_size, 4u);
  EXPECT_EQ(view.row_elements, 8u);
  EXPECT_EQ(view.num_rows, 10u);
  const float* k_base = static_cast<const float*>(view.k);
  const float* v_base = static_cast<const float*>(view.v);
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(k_base[7 * 8 + e], static_cast<float>(e));      // first row -> slot 7
    EXPECT_EQ(k_base[3 * 8 + e], static_cast<float>(8 + e));  // second row -> slot 3
    EXPECT_EQ(v_base[7 * 8 + e], -static_cast<float>(e));
  }
  // Other layers and untouched slots stay zero (fresh anonymous mapping).
  const float* k_other = static_cast<const float*>(storage->k_base(0));
  for (int e = 0; e < 80; ++e) EXPECT_EQ(k_other[e], 0.0f);
  EXPECT_EQ(k_base[5 * 8], 0.0f);
}

TEST(KvStorageTest, ValuesInKeysKeepOneBufferPerLayer) {
  // MLA: the values are a prefix of the keys, so V aliases K and a token costs half the bytes.
  EXPECT_EQ(KvBytesPerToken(4, 1, 576, KvDtype::kBF16, true), 1u * 4 * 576 * 2);
  KvStorageSpec spec{3,   1, 6, KvDtype::kFp8E4M3, 10, {{1.0f, 2.0f, 4.0f}, {8.0f, 8.0f, 8.0f}},
                     true};
  Expected<KvStorage> storage = KvStorage::Create(spec);
  ASSERT_TRUE(storage.ok());
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(storage->k_base(l), storage->v_base(l));
    const KvLayerView view = storage->layer(l);
    EXPECT_EQ(view.k, view.v);
    EXPECT_EQ(view.v_scale, view.k_scale);  // the rows' one scale
  }
  EXPECT_NE(storage->k_base(0), storage->k_base(1));
  const float k[6] = {1, 2, 3, 4, 5, 6};
  const float ignored[6] = {-1, -1, -1, -1, -1, -1};
  const int32_t slot = 4;
  storage->StoreKv(2, {&slot, 1}, k, ignored);
  float k_out[6], v_out[6];
  storage->LoadKv(2, slot, k_out, v_out);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(k_out[i], k[i]);
    EXPECT_EQ(v_out[i], k[i]);
  }
}

TEST(KvStorageTest, Bf16StorageHoldsRoundedBits) {
  KvStorageSpec spec{1, 1, 2, KvDtype::kBF16, 4, {}};
  Expected<KvStorage> storage = KvStorage::Create(spec);
  ASSERT_TRUE(storage.ok());
  const float k[2] = {1.0f, 1.01171875f};
  const float v[2] = {-2.0f, 0.0f};
  const int32_t slot = 2;
  storage->StoreKv(0, {&slot, 1}, k, v);
  const auto* bits = static_cast<const uint16_t*>(storage->k_base(0));
  EXPECT_EQ(bits[4], 0x3F80);
  EXPECT_EQ(bits[5], 0x3F82);
  float k_back[2], v_back[2];
  storage->LoadKv(0, 2, k_back, v_back);
  EXPECT_EQ(k_back[0], 1.0f);
  EXPECT_EQ(v_back[0], -2.0f);
}

TEST(KvStorageTest, Fp8StorageHoldsOneByteCodesOfValueOverTheLayerScale) {
  KvStorageSpec spec{2, 1, 2, KvDtype::kFp8E4M3, 4, KvScales{{1.0f, 0.25f}, {1.0f, 2.0f}}};
  Expected<KvStorage> storage = KvStorage::Create(spec);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(storage->row_bytes(), 2u);
  EXPECT_EQ(storage->layer(1).k_scale, 0.25f);
  EXPECT_EQ(storage->layer(1).v_scale, 2.0f);
  const float k[2] = {0.5f, -200.0f};  // / 0.25: 2 (code 0x40) and -800, saturated to -448 (0xFE)
  const float v[2] = {3.0f, 0.0f};     // / 2: 1.5 (code 0x3C)
  const int32_t slot = 3;
  storage->StoreKv(1, {&slot, 1}, k, v);
  const auto* k_codes = static_cast<const uint8_t*>(storage->k_base(1));
  const auto* v_codes = static_cast<const uint8_t*>(storage->v_base(1));
  EXPECT_EQ(k_codes[6], 0x40);
  EXPECT_EQ(k_codes[7], 0xFE);
  EXPECT_EQ(v_codes[6], 0x3C);
  float k_back[2], v_back[2];
  storage->LoadKv(1, 3, k_back, v_back);
  EXPECT_EQ(k_back[0], 0.5f);
  EXPECT_EQ(k_back[1], -112.0f);  // -448 * 0.25
  EXPECT_EQ(v_back[0], 3.0f);
}

TEST(KvStorageTest, Int8RowsHoldEachHeadsCodesThenItsScale) {
  // Two heads of 3: head h of a slot is 3 one-byte codes followed by its f32 scale
  // max |x| / 127, so a row is 2 * (3 + 4) bytes and the values are code * scale.
  KvStorageSpec spec{1, 2, 3, KvDtype::kInt8, 4, {}};
  Expected<KvStorage> storage = KvStorage::Create(spec);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(storage->row_bytes(), 14u);
  EXPECT_EQ(storage->row_values(), 6u);
  EXPECT_EQ(KvBytesPerToken(1, 2, 3, KvDtype::kInt8), 28u);
  const float k[6] = {127.0f, -63.5f, 1.0f, 0.0f, 0.0f, 0.0f};  // head 1 all zero: scale 0
  const float v[6] = {0.5f, -0.25f, 2.54f, 1.0f, 2.0f, -4.0f};
  const int32_t slot = 2;
  storage->StoreKv(0, {&slot, 1}, k, v);
  const auto* row = static_cast<const int8_t*>(storage->k_base(0)) + 2 * 14;
  EXPECT_EQ(row[0], 127);
  EXPECT_EQ(row[1], -64);  // -63.5 rounds half to even
  EXPECT_EQ(row[2], 1);
  float scale = 0.0f;
  std::memcpy(&scale, row + 3, 4);
  EXPECT_EQ(scale, 1.0f);
  std::memcpy(&scale, row + 7 + 3, 4);
  EXPECT_EQ(scale, 0.0f);
  float k_back[6], v_back[6];
  storage->LoadKv(0, 2, k_back, v_back);
  EXPECT_EQ(k_back[0], 127.0f);
  EXPECT_EQ(k_back[1], -64.0f);
  EXPECT_EQ(k_back[3], 0.0f);
  const float v_scale = 2.54f / 127.0f;  // head 0 of V
  EXPECT_EQ(v_back[2], 127.0f * v_scale);
  EXPECT_EQ(v_back[0], std::nearbyint(0.5f * (1.0f / v_scale)) * v_scale);
  EXPECT_EQ(v_back[5], -4.0f);  // head 1's max: exact
}

TEST(KvStorageTest, ZeroLayersNeedNoMemory) {
  Expected<KvStorage> storage = KvStorage::Create(KvStorageSpec{0, 4, 4, KvDtype::kF32, 100, {}});
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(storage->k_bytes(), 0u);
}

}  // namespace
}  // namespace radixserve::kv
