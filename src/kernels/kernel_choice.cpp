#include "kernels/kernel_choice.h"

#include <cpuid.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/check.h"
#include "common/log.h"
#include "common/replace_file.h"
#include "kernels/calibrate.h"
#include "kernels/half.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"
#include "kernels/x86/amx.h"

namespace radixserve::kernels {
namespace {

constexpr const char* kForceVariable = "RADIX_BF16_PRODUCT";
// KernelChoice::bf16_source where the table runs one BF16 product.
constexpr const char* kOnlyProduct = "the only one here";
constexpr const char* kForceTilesVariable = "RADIX_QUANT_TILES";
// Bumped when the measured kernels change in a way that may reorder them.
constexpr int kChoiceFormat = 3;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string CpuIdentity() {
  unsigned regs[12] = {};
  std::string brand;
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned* r = regs + 4 * leaf;
    if (__get_cpuid(0x80000002u + leaf, &r[0], &r[1], &r[2], &r[3]) == 0) break;
  }
  brand.assign(reinterpret_cast<const char*>(regs), sizeof(regs));
  brand.erase(std::find(brand.begin(), brand.end(), '\0'), brand.end());
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  const unsigned family = ((eax >> 8) & 0xF) + (((eax >> 8) & 0xF) == 0xF ? (eax >> 20) & 0xFF : 0);
  const unsigned model = ((eax >> 4) & 0xF) | (((eax >> 16) & 0xF) << 4);
  return fmt::format("{} family {} model {} stepping {}", brand, family, model, eax & 0xF);
}

std::string BinaryIdentity() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  struct stat st {};
  if (error || ::stat(exe.c_str(), &st) != 0) return "unknown binary";
  return fmt::format("{} size {} mtime {}.{:09d}", exe.string(), st.st_size, st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
}

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string CacheFile(const KernelChoiceInputs& inputs) {
  if (inputs.cache_dir.empty()) return "";
  return fmt::format("{}/kernel-choice-{:016x}.txt", inputs.cache_dir, Fnv1a(inputs.machine_key));
}

// What a cache file holds for one key: either measurement may be missing.
struct Measurements {
  std::optional<Bf16Timing> bf16;
  std::optional<QuantTilesTiming> tiles;
};

// The cached measurements for this key (none when the file is missing or holds another key).
Measurements ReadCache(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return {};
  std::string line;
  std::optional<double> widen, dot, amx, expand, compact;
  bool key_matches = false;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "key") key_matches = value == key;
    char* end = nullptr;
    const double seconds = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !(seconds > 0.0)) continue;
    if (name == "widen_fma_seconds") widen = seconds;
    if (name == "dot_bf16_seconds") dot = seconds;
    if (name == "amx_bf16_seconds") amx = seconds;
    if (name == "quant_tiles_expand_seconds") expand = seconds;
    if (name == "quant_tiles_compact_seconds") compact = seconds;
  }
  Measurements out;
  if (!key_matches) return out;
  // A machine with AMX needs its time too (a file from a run without it is measured again).
  if (widen && dot && (amx || !Bf16AmxSupported())) {
    out.bf16 = Bf16Timing{*widen, *dot, amx.value_or(0.0)};
  }
  if (expand && compact) out.tiles = QuantTilesTiming{*expand, *compact};
  return out;
}

// Writes the measurements whole (ReplaceFile), so concurrent starts never read half a file.
// Returns false (and the caller keeps going) when it cannot.
bool WriteCache(const std::string& path, const std::string& key, const Measurements& kept) {
  std::string text = "key=" + key + "\n";
  if (kept.bf16) {
    text += fmt::format("widen_fma_seconds={:.17g}\ndot_bf16_seconds={:.17g}\n",
                        kept.bf16->widen_fma, kept.bf16->dot_bf16);
    if (kept.bf16->amx_bf16 > 0.0) {
      text += fmt::format("amx_bf16_seconds={:.17g}\n", kept.bf16->amx_bf16);
    }
  }
  if (kept.tiles) {
    text += fmt::format("quant_tiles_expand_seconds={:.17g}\nquant_tiles_compact_seconds={:.17g}\n",
                        kept.tiles->expand, kept.tiles->compact);
  }
  return ReplaceFile(path, text);
}

// The error for a RADIX_BF16_PRODUCT value that names no product.
std::string UnknownProductError(std::string_view name) {
  return fmt::format("{}={} is not a BF16 product; use widen_fma, dot_bf16 or amx_bf16",
                     kForceVariable, name);
}

// The error for a RADIX_BF16_PRODUCT value this machine cannot run ("" when it can).
std::string ProductError(std::string_view name) {
  const std::optional<Bf16Product> product = ParseBf16Product(name);
  if (!product) return UnknownProductError(name);
  if (*product == Bf16Product::kAmxTile && Bf16PanelsSupported() && !Bf16AmxSupported()) {
    return fmt::format(
        "{}={}: this machine has no usable AMX-BF16 (the CPU lacks it or the OS does not grant "
        "the tile state); use widen_fma or dot_bf16",
        kForceVariable, name);
  }
  return "";
}

// The error for a RADIX_QUANT_TILES value that names no tiling.
std::string UnknownTilesError(std::string_view name) {
  return fmt::format("{}={} is not a quantized tiling; use expand or compact", kForceTilesVariable,
                     name);
}

Bf16Product Faster(const Bf16Timing& timing) {
  const Bf16Product pair =
      timing.dot_bf16 < timing.widen_fma ? Bf16Product::kDotBf16 : Bf16Product::kWidenFma;
  const double pair_seconds = std::min(timing.dot_bf16, timing.widen_fma);
  return timing.amx_bf16 > 0.0 && timing.amx_bf16 < pair_seconds ? Bf16Product::kAmxTile : pair;
}

QuantTiles Faster(const QuantTilesTiming& timing) {
  return timing.compact < timing.expand ? QuantTiles::kCompact : QuantTiles::kExpand;
}

}  // namespace

std::string_view Bf16ProductName(Bf16Product product) {
  switch (product) {
    case Bf16Product::kDotBf16:
      return "dot_bf16";
    case Bf16Product::kAmxTile:
      return "amx_bf16";
    case Bf16Product::kWidenFma:
      break;
  }
  return "widen_fma";
}

std::optional<Bf16Product> ParseBf16Product(std::string_view name) {
  if (name == "dot_bf16") return Bf16Product::kDotBf16;
  if (name == "amx_bf16") return Bf16Product::kAmxTile;
  if (name == "widen_fma") return Bf16Product::kWidenFma;
  return std::nullopt;
}

Bf16Timing MeasureBf16Products() {
  // A prefill-like problem that stays in cache (4 panels of 1024 columns, 128 KB, and 40 tokens),
  // run on one thread: the products' compute rate, not the memory system's.
  constexpr int64_t kRowsN = 64, kColsN = 1024, kTokens = 40;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> weights(static_cast<size_t>(kRowsN * kColsN));
  for (auto& v : weights) v = F32ToBf16(dist(rng));
  std::vector<float> x(static_cast<size_t>(kTokens * kColsN));
  for (auto& v : x) v = dist(rng);
  const WeightMatrix w{WeightFormat::kBF16, kRowsN, kColsN, weights.data()};
  std::vector<uint8_t> panels(static_cast<size_t>(Bf16PanelBytes(w)));
  PackBf16Panels(w, nullptr, panels.data());
  std::vector<float> y(static_cast<size_t>(kTokens * kRowsN));

  const auto run = [&](Bf16Product product) {
    Bf16PanelMatMulWith(product, nullptr, x.data(), kTokens, w, panels.data(), y.data());
  };
  if (!Bf16AmxSupported()) {
    const auto [widen_fma, dot_bf16] = BestOfAlternatingRounds([&] { run(Bf16Product::kWidenFma); },
                                                               [&] { run(Bf16Product::kDotBf16); });
    return Bf16Timing{widen_fma, dot_bf16};
  }
  const auto [widen_fma, dot_bf16, amx_bf16] = BestOfAlternatingRounds(
      [&] { run(Bf16Product::kWidenFma); }, [&] { run(Bf16Product::kDotBf16); },
      [&] { run(Bf16Product::kAmxTile); });
  return Bf16Timing{widen_fma, dot_bf16, amx_bf16};
}

KernelChoiceInputs ProcessKernelChoiceInputs() {
  KernelChoiceInputs inputs;
  inputs.forced_bf16_product = Env(kForceVariable);
  inputs.forced_quant_tiles = Env(kForceTilesVariable);
  if (const std::string radix = Env("RADIX_CACHE"); !radix.empty()) {
    inputs.cache_dir = radix + "/kernels";
  } else if (const std::string xdg = Env("XDG_CACHE_HOME"); !xdg.empty()) {
    inputs.cache_dir = xdg + "/radixserve/kernels";
  } else if (const std::string home = Env("HOME"); !home.empty()) {
    inputs.cache_dir = home + "/.cache/radixserve/kernels";
  }
  inputs.machine_key =
      fmt::format("{}; {}; format {}", CpuIdentity(), BinaryIdentity(), kChoiceFormat);
  return inputs;
}

KernelChoiceResult ChooseKernels(const KernelChoiceInputs& inputs) {
  return ChooseKernels(inputs, ActiveKernels());
}

KernelChoiceResult ChooseKernels(const KernelChoiceInputs& inputs, const KernelTable& table) {
  KernelChoiceResult result;
  KernelChoice& choice = result.choice;
  choice.table = table.name;
  choice.quantized = QuantMatMulVariant(table);
  choice.bf16_panels = Bf16PanelsFor(table.name);
  const bool tiles_apply = choice.quantized == "avx512_vnni";
  if (tiles_apply && x86::AmxInt8Usable()) {
    choice.quant_amx = QuantAmxEnabled();
    choice.quant_amx_source = choice.quant_amx ? "available" : "off (RADIX_QUANT_AMX=0)";
  }
  if (!inputs.forced_bf16_product.empty()) {
    const std::optional<Bf16Product> forced = ParseBf16Product(inputs.forced_bf16_product);
    result.error = ProductError(inputs.forced_bf16_product);
    if (!result.error.empty()) return result;
    choice.bf16_product = *forced;
    choice.bf16_source = "forced";
  }
  if (choice.bf16_panels && (choice.table == "avx2" || !Bf16DotSupported())) {
    // One product here, widen_fma (bf16_panels.h): the avx2 table's, and the avx512 one's on a
    // CPU without AVX512-BF16.
    if (choice.bf16_source != "forced") {
      choice.bf16_source = kOnlyProduct;
    } else if (choice.bf16_product != Bf16Product::kWidenFma) {
      RADIX_LOG_WARN("{}={} has no effect here: the {} kernels multiply BF16 panels by widen_fma",
                     kForceVariable, Bf16ProductName(choice.bf16_product), choice.table);
      choice.bf16_source = kOnlyProduct;
    }
    choice.bf16_product = Bf16Product::kWidenFma;
  }
  if (!inputs.forced_quant_tiles.empty()) {
    const std::optional<QuantTiles> forced = ParseQuantTiles(inputs.forced_quant_tiles);
    if (!forced) {
      result.error = UnknownTilesError(inputs.forced_quant_tiles);
      return result;
    }
    if (tiles_apply) {
      choice.quant_tiles = *forced;
      choice.quant_tiles_source = "forced";
    } else {
      RADIX_LOG_WARN("{} has no effect here: the {} matmul has one way to run its tiles",
                     kForceTilesVariable,
                     choice.quantized.empty() ? "reference" : choice.quantized);
    }
  }
  const bool need_bf16 = choice.bf16_panels && choice.bf16_source.empty();
  const bool need_tiles = tiles_apply && choice.quant_tiles_source.empty();
  if (!need_bf16 && !need_tiles) return result;
  choice.cache_file = CacheFile(inputs);
  Measurements kept;
  if (!choice.cache_file.empty()) kept = ReadCache(choice.cache_file, inputs.machine_key);
  bool measured = false;
  if (need_bf16) {
    choice.bf16_source = kept.bf16 ? "cached" : "measured";
    if (!kept.bf16) {
      kept.bf16 = MeasureBf16Products();
      measured = true;
    }
    choice.bf16_timing = kept.bf16;
    choice.bf16_product = Faster(*kept.bf16);
  }
  if (need_tiles) {
    choice.quant_tiles_source = kept.tiles ? "cached" : "measured";
    if (!kept.tiles) {
      kept.tiles = MeasureQuantTiles(table);
      measured = true;
    }
    RADIX_CHECK(kept.tiles.has_value());
    choice.quant_tiles_timing = kept.tiles;
    choice.quant_tiles = Faster(*kept.tiles);
  }
  if (measured && !choice.cache_file.empty() &&
      !WriteCache(choice.cache_file, inputs.machine_key, kept)) {
    RADIX_LOG_WARN("could not keep the kernel measurement in {}; it will be repeated next start",
                   choice.cache_file);
    choice.cache_file.clear();
  }
  return result;
}

std::string ValidateKernelChoiceEnvironment() {
  const std::string forced = Env(kForceVariable);
  if (!forced.empty()) {
    if (std::string error = ProductError(forced); !error.empty()) return error;
  }
  if (std::string error = QuantAmxEnvironmentError(); !error.empty()) return error;
  const std::string tiles = Env(kForceTilesVariable);
  if (!tiles.empty() && !ParseQuantTiles(tiles)) return UnknownTilesError(tiles);
  return "";
}

const KernelChoice& ActiveKernelChoice() {
  static const KernelChoice chosen = [] {
    KernelChoiceInputs inputs = ProcessKernelChoiceInputs();
    KernelChoiceResult result = ChooseKernels(inputs);
    if (!result.error.empty()) {
      RADIX_LOG_WARN("{}; measuring instead", result.error);
      if (!ProductError(inputs.forced_bf16_product).empty()) inputs.forced_bf16_product.clear();
      if (!ParseQuantTiles(inputs.forced_quant_tiles)) inputs.forced_quant_tiles.clear();
      result = ChooseKernels(inputs);
    }
    // Checked here, once, so that the start-up line and /server_info say it.
    result.choice.bf16_amx_small_steps = result.choice.bf16_panels &&
                                         result.choice.bf16_product == Bf16Product::kAmxTile &&
                                         Bf16AmxSmallStepsReproduced();
    return result.choice;
  }();
  return chosen;
}

Bf16Product ActiveBf16Product() { return ActiveKernelChoice().bf16_product; }

QuantTiles ActiveQuantTiles() { return ActiveKernelChoice().quant_tiles; }

std::string DescribeKernelChoice(const KernelChoice& choice) {
  std::string text = fmt::format("Kernels: {} instruction set, quantized matmul {}", choice.table,
                                 choice.quantized.empty() ? "reference" : choice.quantized);
  if (!choice.quant_tiles_source.empty()) {
    text += fmt::format(" with {} tiles ({}", QuantTilesName(choice.quant_tiles),
                        choice.quant_tiles_source == "forced" ? "forced by RADIX_QUANT_TILES"
                                                              : choice.quant_tiles_source);
    if (choice.quant_tiles_timing) {
      text += fmt::format(": expand {:.1f} us, compact {:.1f} us per calibration call",
                          choice.quant_tiles_timing->expand * 1e6,
                          choice.quant_tiles_timing->compact * 1e6);
    }
    text += ")";
  }
  if (!choice.quant_amx_source.empty()) {
    text += choice.quant_amx ? fmt::format(", AMX-INT8 tiles for {}+ tokens", kQuantAmxMinTokens)
                             : std::string(", AMX-INT8 off (RADIX_QUANT_AMX=0)");
  }
  if (!choice.bf16_panels) {
    text += ", BF16 through the float matmul";
  } else {
    text += fmt::format(
        ", BF16 panels with {} ({}", Bf16ProductName(choice.bf16_product),
        choice.bf16_source == "forced" ? "forced by RADIX_BF16_PRODUCT" : choice.bf16_source);
    if (choice.bf16_timing) {
      text += fmt::format(": widen_fma {:.1f} us, dot_bf16 {:.1f} us",
                          choice.bf16_timing->widen_fma * 1e6, choice.bf16_timing->dot_bf16 * 1e6);
      if (choice.bf16_timing->amx_bf16 > 0.0) {
        text += fmt::format(", amx_bf16 {:.1f} us", choice.bf16_timing->amx_bf16 * 1e6);
      }
      text += " per calibration call";
    }
    text += ")";
    if (choice.bf16_panels && choice.bf16_product == Bf16Product::kAmxTile) {
      text += choice.bf16_amx_small_steps
                  ? fmt::format(
                        ", steps of 1-{} tokens on vector tiles that reproduce the AMX "
                        "tiles' bits",
                        kBf16AmxReproducedTokens)
                  : ", every step on the AMX tiles";
    }
  }
  if (!choice.cache_file.empty()) text += fmt::format("; kept in {}", choice.cache_file);
  return text;
}

}  // namespace radixserve::kernels
