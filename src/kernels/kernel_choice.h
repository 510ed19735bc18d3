// Which implementation each kernel family runs on this machine, and why.
//
// Some families have more than one implementation whose speed order depends on the CPU, not only
// on its instruction sets:
//   - BF16 panels multiply by widening to f32 and two FMAs, by one vdpbf16ps, or by AMX tiles
//     where the CPU has them (bf16_panels.h), and vdpbf16ps issues at a third of the FMA rate on
//     Sapphire Rapids but at full rate on Zen 4/5;
//   - the avx512_vnni quantized matmul runs several token tiles over a compact panel either by
//     expanding it once into byte codes or by decoding it in every tile (quant_matmul.h's
//     QuantTiles), a trade of decode instructions against bytes read per tile.
// Those are chosen by measurement: a short calibration (a few milliseconds of each candidate on
// an in-cache problem, alternated, best of several rounds) whose result is cached on disk, keyed
// by the CPU (brand string, family, model, stepping) and by the binary (its path, size and
// modification time), so a restart on the same machine reuses it.
//
// Forcing: RADIX_KERNELS=ref|avx2|avx512 chooses the instruction-set table (kernel_table.h);
// RADIX_BF16_PRODUCT=widen_fma|dot_bf16|amx_bf16 chooses the BF16 product and
// RADIX_QUANT_TILES=expand|compact the quantized tiles without measuring; RADIX_QUANT_AMX=0 keeps
// the quantized matmul off AMX-INT8 tiles (quant_matmul.h's QuantAmxEnabled()). The choice is
// logged at startup and reported by /server_info.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kernels/bf16_panels.h"
#include "kernels/quant_matmul.h"

namespace radixserve::kernels {

std::string_view Bf16ProductName(Bf16Product product);
std::optional<Bf16Product> ParseBf16Product(std::string_view name);

// Seconds per call of each BF16 product on the calibration problem (lower is faster).
struct Bf16Timing {
  double widen_fma = 0.0;
  double dot_bf16 = 0.0;
  double amx_bf16 = 0.0;  // 0 when the machine cannot run it (Bf16AmxSupported())
};
// Runs the calibration: alternating rounds of each product this machine runs, the best round of
// each. Requires
// Bf16DotSupported(). Takes a few tens of milliseconds.
Bf16Timing MeasureBf16Products();

struct KernelChoice {
  std::string_view table;      // the instruction-set table: ref, avx2, avx512
  std::string_view quantized;  // the quantized matmul variant ("" when none)
  bool bf16_panels = false;    // BF16 weights run as packed panels (Bf16PanelsFor(table))
  Bf16Product bf16_product = Bf16Product::kWidenFma;
  // How bf16_product was chosen: "forced", "measured", "cached", "the only one here" (the avx2
  // table, or avx512 without AVX512-BF16: widen_fma), or "" without panels.
  std::string bf16_source;
  std::optional<Bf16Timing> bf16_timing;  // measured or read from the cache
  // With kAmxTile: steps of up to kBf16AmxReproducedTokens tokens run on vector tiles that
  // reproduce the AMX tiles' bits (Bf16AmxSmallStepsReproduced()); false means they stay on the
  // tiles.
  bool bf16_amx_small_steps = false;
  // The avx512_vnni variant's token tiles; quant_tiles_source as bf16_source ("" when the
  // variant is not avx512_vnni, which has nothing to choose).
  QuantTiles quant_tiles = QuantTiles::kCompact;
  std::string quant_tiles_source;
  std::optional<QuantTilesTiming> quant_tiles_timing;
  // The avx512_vnni variant runs groups of 16 tokens on AMX-INT8 tiles (QuantAmxEnabled());
  // quant_amx_source: "available", "off (RADIX_QUANT_AMX=0)", or "" without AMX-INT8.
  bool quant_amx = false;
  std::string quant_amx_source;
  std::string cache_file;  // where the measurements are kept ("" when not kept)
};

// Where the choice comes from. Empty members mean "not set".
struct KernelChoiceInputs {
  std::string forced_bf16_product;  // RADIX_BF16_PRODUCT
  std::string cache_dir;            // directory for the cached measurements
  std::string machine_key;          // CPU and binary identity (the cache file's name)
  std::string forced_quant_tiles;   // RADIX_QUANT_TILES
};

// The inputs of this process: RADIX_BF16_PRODUCT, RADIX_QUANT_TILES; the cache directory
// $RADIX_CACHE/kernels,
// else $XDG_CACHE_HOME/radixserve/kernels, else $HOME/.cache/radixserve/kernels; the key of this
// CPU and this binary.
KernelChoiceInputs ProcessKernelChoiceInputs();

// Chooses each family from `inputs`: a forced name, else the cached measurement for the key,
// else a new measurement (written to the cache when the directory is writable). An unknown
// forced name is an error naming the variable.
struct KernelChoiceResult {
  KernelChoice choice;
  std::string error;
};
KernelChoiceResult ChooseKernels(const KernelChoiceInputs& inputs);
// The same for a given table (the one above uses ActiveKernels()).
KernelChoiceResult ChooseKernels(const KernelChoiceInputs& inputs, const KernelTable& table);

// The choice of this process, made once on first use (from ProcessKernelChoiceInputs()). An
// invalid RADIX_BF16_PRODUCT or RADIX_QUANT_TILES is reported by ValidateKernelChoiceEnvironment
// before this runs.
const KernelChoice& ActiveKernelChoice();

// "" when RADIX_BF16_PRODUCT and RADIX_QUANT_TILES are unset or valid; otherwise the error
// message.
std::string ValidateKernelChoiceEnvironment();

// One line for the startup log.
std::string DescribeKernelChoice(const KernelChoice& choice);

}  // namespace radixserve::kernels
