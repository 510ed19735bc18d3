#include "model/gpt_oss_experts.h"

#include <cstring>
#include <map>

namespace radixserve::model {
namespace {

// One expert parameter of a layer, and the file holding it.
struct Source {
  const SafetensorsTensor* tensor = nullptr;
  std::string file;
  bool raw = false;  // a U8 tensor (MXFP4 blocks or scales); else F32, F16 or BF16
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ggml's MXFP4 row from one row of `groups` HF blocks (16 bytes each) and their exponents.
void GgmlMxfp4Row(const uint8_t* blocks, const uint8_t* scales, int64_t groups, uint8_t* out) {
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* b = blocks + g * 16;
    uint8_t codes[32];
    for (int j = 0; j < 16; ++j) {
      codes[2 * j] = b[j] & 0x0F;
      codes[2 * j + 1] = b[j] >> 4;
    }
    uint8_t* o = out + g * 17;
    o[0] = scales[g];
    for (int j = 0; j < 16; ++j) o[1 + j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
  }
}

class LayerConverter {
 public:
  LayerConverter(std::string layer, std::map<std::string, Source> parts)
      : prefix_("blk." + layer + "."), parts_(std::move(parts)) {}

  Status Convert(std::vector<ConvertedTensor>* out) {
    RADIX_RETURN_IF_ERROR(Biases(out));
    if (parts_.count("gate_up_proj_blocks") != 0) return Mxfp4(out);
    return Floats(out);
  }

 private:
  // The part named `what`, which must be U8 (raw) or a float type (not raw).
  Expected<Source> Need(const std::string& what, bool raw = false) const {
    auto it = parts_.find(what);
    if (it == parts_.end()) {
      return DataLoss("gpt-oss checkpoint: " + prefix_ + " experts lack mlp.experts." + what);
    }
    if (it->second.raw != raw) {
      return Unsupported(it->second.file + ": gpt-oss mlp.experts." + what + " must be " +
                         (raw ? "U8" : "F32, F16 or BF16"));
    }
    return it->second;
  }
  Status WrongShape(const Source& s, const std::string& what, const std::string& want) const {
    return DataLoss(s.file + ": gpt-oss mlp.experts." + what + " has shape " +
                    ShapeText(s.tensor->shape) + ", expected " + want);
  }

  // Learns experts_, inter_ and hidden_ from the biases (always floats) and splits them.
  Status Biases(std::vector<ConvertedTensor>* out) {
    RADIX_ASSIGN_OR_RETURN(const Source gu, Need("gate_up_proj_bias"));
    RADIX_ASSIGN_OR_RETURN(const Source down, Need("down_proj_bias"));
    const auto& gs = gu.tensor->shape;
    if (gs.size() != 2 || gs[1] % 2 != 0) {
      return WrongShape(gu, "gate_up_proj_bias", "[experts, 2 * intermediate]");
    }
    experts_ = gs[0];
    inter_ = gs[1] / 2;
    const auto& ds = down.tensor->shape;
    if (ds.size() != 2 || ds[0] != experts_) {
      std::string want = "[";  // built in steps: GCC 12 misreports "[" + to_string(...)
      want += std::to_string(experts_);
      want += ", hidden]";
      return WrongShape(down, "down_proj_bias", want);
    }
    hidden_ = ds[1];
    const int64_t es = kernels::BlockBytes(gu.tensor->format);
    for (int half = 0; half < 2; ++half) {
      ConvertedTensor t{prefix_ + (half == 0 ? "ffn_gate_exps.bias" : "ffn_up_exps.bias"),
                        gu.file,
                        gu.tensor->format,
                        {experts_, inter_},
                        {}};
      t.bytes.resize(static_cast<size_t>(experts_ * inter_ * es));
      for (int64_t e = 0; e < experts_; ++e) {
        for (int64_t i = 0; i < inter_; ++i) {
          std::memcpy(t.bytes.data() + (e * inter_ + i) * es,
                      gu.tensor->data + (e * 2 * inter_ + 2 * i + half) * es,
                      static_cast<size_t>(es));
        }
      }
      out->push_back(std::move(t));
    }
    ConvertedTensor d{prefix_ + "ffn_down_exps.bias", down.file, down.tensor->format, ds, {}};
    d.bytes.assign(down.tensor->data, down.tensor->data + down.tensor->bytes);
    out->push_back(std::move(d));
    return Status::Ok();
  }

  // gate_up_proj [E, H, 2I] and down_proj [E, I, H] in a float type: transposed rows.
  Status Floats(std::vector<ConvertedTensor>* out) {
    RADIX_ASSIGN_OR_RETURN(const Source gu, Need("gate_up_proj"));
    RADIX_ASSIGN_OR_RETURN(const Source down, Need("down_proj"));
    const int64_t E = experts_, H = hidden_, I = inter_;
    if (gu.tensor->shape != std::vector<int64_t>{E, H, 2 * I}) {
      return WrongShape(gu, "gate_up_proj", ShapeText({E, H, 2 * I}));
    }
    if (down.tensor->shape != std::vector<int64_t>{E, I, H}) {
      return WrongShape(down, "down_proj", ShapeText({E, I, H}));
    }
    const int64_t es = kernels::BlockBytes(gu.tensor->format);
    for (int half = 0; half < 2; ++half) {
      ConvertedTensor t{prefix_ + (half == 0 ? "ffn_gate_exps.weight" : "ffn_up_exps.weight"),
                        gu.file,
                        gu.tensor->format,
                        {E, I, H},
                        {}};
      t.bytes.resize(static_cast<size_t>(E * I * H * es));
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t h = 0; h < H; ++h) {
          const uint8_t* src = gu.tensor->data + ((e * H + h) * 2 * I + half) * es;
          for (int64_t i = 0; i < I; ++i) {
            std::memcpy(t.bytes.data() + ((e * I + i) * H + h) * es, src + 2 * i * es,
                        static_cast<size_t>(es));
          }
        }
      }
      out->push_back(std::move(t));
    }
    const int64_t ds = kernels::BlockBytes(down.tensor->format);
    ConvertedTensor d{
        prefix_ + "ffn_down_exps.weight", down.file, down.tensor->format, {E, H, I}, {}};
    d.bytes.resize(static_cast<size_t>(E * H * I * ds));
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t i = 0; i < I; ++i) {
        const uint8_t* src = down.tensor->data + (e * I + i) * H * ds;
        for (int64_t h = 0; h < H; ++h) {
          std::memcpy(d.bytes.data() + ((e * H + h) * I + i) * ds, src + h * ds,
                      static_cast<size_t>(ds));
        }
      }
    }
    out->push_back(std::move(d));
    return Status::Ok();
  }

  // The MXFP4 pairs: [E, rows, groups, 16] blocks and [E, rows, groups] scales.
  Status Mxfp4(std::vector<ConvertedTensor>* out) {
    const int64_t E = experts_, H = hidden_, I = inter_;
    if (H % 32 != 0 || I % 32 != 0) {
      return DataLoss(
          "gpt-oss checkpoint: MXFP4 experts need hidden and intermediate sizes that "
          "are multiples of 32");
    }
    RADIX_ASSIGN_OR_RETURN(const Source gub, Need("gate_up_proj_blocks", true));
    RADIX_ASSIGN_OR_RETURN(const Source gus, Need("gate_up_proj_scales", true));
    RADIX_ASSIGN_OR_RETURN(const Source db, Need("down_proj_blocks", true));
    RADIX_ASSIGN_OR_RETURN(const Source ds, Need("down_proj_scales", true));
    const struct {
      const Source& s;
      const char* what;
      std::vector<int64_t> shape;
    } checks[] = {{gub, "gate_up_proj_blocks", {E, 2 * I, H / 32, 16}},
                  {gus, "gate_up_proj_scales", {E, 2 * I, H / 32}},
                  {db, "down_proj_blocks", {E, H, I / 32, 16}},
                  {ds, "down_proj_scales", {E, H, I / 32}}};
    for (const auto& c : checks) {
      if (c.s.tensor->shape != c.shape) return WrongShape(c.s, c.what, ShapeText(c.shape));
    }
    const int64_t gh = H / 32, gi = I / 32;
    for (int half = 0; half < 2; ++half) {
      ConvertedTensor t{prefix_ + (half == 0 ? "ffn_gate_exps.weight" : "ffn_up_exps.weight"),
                        gub.file,
                        kernels::WeightFormat::kMXFP4,
                        {E, I, H},
                        {}};
      t.bytes.resize(static_cast<size_t>(E * I * gh * 17));
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t i = 0; i < I; ++i) {
          const int64_t row = e * 2 * I + 2 * i + half;  // gate rows even, up rows odd
          GgmlMxfp4Row(gub.tensor->data + row * gh * 16, gus.tensor->data + row * gh, gh,
                       t.bytes.data() + (e * I + i) * gh * 17);
        }
      }
      out->push_back(std::move(t));
    }
    ConvertedTensor d{
        prefix_ + "ffn_down_exps.weight", db.file, kernels::WeightFormat::kMXFP4, {E, H, I}, {}};
    d.bytes.resize(static_cast<size_t>(E * H * gi * 17));
    for (int64_t row = 0; row < E * H; ++row) {
      GgmlMxfp4Row(db.tensor->data + row * gi * 16, ds.tensor->data + row * gi, gi,
                   d.bytes.data() + row * gi * 17);
    }
    out->push_back(std::move(d));
    return Status::Ok();
  }

  std::string prefix_;
  std::map<std::string, Source> parts_;
  int64_t experts_ = 0, inter_ = 0, hidden_ = 0;
};

// "model.layers.<N>.mlp.experts.<what>" -> (N, what); false for other names.
bool ExpertPart(const std::string& name, std::string* layer, std::string* what) {
  const std::string prefix = "model.layers.";
  const std::string mid = ".mlp.experts.";
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t at = name.find(mid, prefix.size());
  if (at == std::string::npos) return false;
  *layer = name.substr(prefix.size(), at - prefix.size());
  *what = name.substr(at + mid.size());
  return !layer->empty() && layer->size() <= 6 &&
         layer->find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

Expected<std::vector<ConvertedTensor>> ConvertGptOssExperts(
    const std::vector<SafetensorsFile>& files) {
  std::map<int64_t, std::map<std::string, Source>> layers;
  std::map<int64_t, std::string> layer_names;
  const auto collect = [&](const SafetensorsFile& f, const std::string& name,
                           const SafetensorsTensor* t, bool raw) -> Status {
    std::string layer, what;
    if (!ExpertPart(name, &layer, &what)) return Status::Ok();
    const int64_t index = std::stoll(layer);
    layer_names[index] = layer;
    if (!layers[index].emplace(what, Source{t, f.path(), raw}).second) {
      return DataLoss(f.path() + ": tensor " + name + " appears in more than one file");
    }
    return Status::Ok();
  };
  for (const SafetensorsFile& f : files) {
    for (const SafetensorsTensor& t : f.tensors()) {
      RADIX_RETURN_IF_ERROR(collect(f, t.name, &t, false));
    }
    for (const auto& [name, dtype] : f.other_dtypes()) {
      std::string layer, what;
      if (!ExpertPart(name, &layer, &what)) continue;
      if (dtype != "U8") {
        return Unsupported(f.path() + ": tensor " + name + " has dtype " + dtype +
                           "; gpt-oss MXFP4 blocks and scales are U8");
      }
      RADIX_RETURN_IF_ERROR(collect(f, name, f.FindOther(name), true));
    }
  }
  std::vector<ConvertedTensor> out;
  for (auto& [index, parts] : layers) {
    LayerConverter converter(layer_names[index], std::move(parts));
    RADIX_RETURN_IF_ERROR(converter.Convert(&out));
  }
  return out;
}

}  // namespace radixserve::model
