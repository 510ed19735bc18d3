// tokenizer.json (HF tokenizers serialization) -> Tokenizer.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base64.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/precompiled_normalizer.h"
#include "tokenizer/tokenizer_loader.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unigram_model.h"
#include "tokenizer/wordpiece_model.h"

namespace radixserve::tokenizer {

namespace {

using nlohmann::json;

std::string TypeOf(const json& j) { return j.value("type", std::string()); }

Expected<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// {"String": s} or {"Regex": r} -> (is_regex, text).
Expected<std::pair<bool, std::string>> ParsePattern(const json& j) {
  if (j.contains("String")) return std::make_pair(false, j.at("String").get<std::string>());
  if (j.contains("Regex")) return std::make_pair(true, j.at("Regex").get<std::string>());
  return InvalidArgument("pattern must be String or Regex");
}

Expected<std::unique_ptr<Normalizer>> BuildNormalizer(const json& j) {
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& s : j.at("normalizers")) {
      RADIX_ASSIGN_OR_RETURN(auto n, BuildNormalizer(s));
      steps.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormalForm::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(new PrependNormalizer(j.at("prepend").get<std::string>()));
  }
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(j.value("strip_left", true), j.value("strip_right", true)));
  }
  if (type == "Replace") {
    RADIX_ASSIGN_OR_RETURN(auto pat, ParsePattern(j.at("pattern")));
    const std::string content = j.at("content").get<std::string>();
    if (!pat.first) {
      return std::unique_ptr<Normalizer>(new ReplaceNormalizer(pat.second, content));
    }
    RADIX_ASSIGN_OR_RETURN(auto re, Regex::Compile(pat.second));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(re), content));
  }
  if (type == "Precompiled") {
    const json& map = j.at("precompiled_charsmap");
    if (map.is_null()) return std::unique_ptr<Normalizer>(new SequenceNormalizer({}));
    auto blob = Base64Decode(map.get<std::string>());
    if (!blob) return DataLoss("precompiled_charsmap is not base64");
    RADIX_ASSIGN_OR_RETURN(auto n, PrecompiledNormalizer::Create(std::move(*blob)));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "BertNormalizer") {
    const bool lowercase = j.value("lowercase", true);
    const bool strip = j.contains("strip_accents") && j.at("strip_accents").is_boolean()
                           ? j.at("strip_accents").get<bool>()
                           : lowercase;
    return std::unique_ptr<Normalizer>(new BertNormalizer(
        j.value("clean_text", true), j.value("handle_chinese_chars", true), strip, lowercase));
  }
  return Unsupported("tokenizer.json normalizer '" + type + "' is not supported");
}

Expected<SplitBehavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgument("unknown split behavior '" + name + "'");
}

PrependScheme ParsePrependScheme(const json& j) {
  if (j.contains("prepend_scheme")) {
    const std::string s = j.at("prepend_scheme").get<std::string>();
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    return PrependScheme::kAlways;
  }
  return j.value("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

bool IsBertPunctuation(char32_t cp) { return IsPunctuation(cp); }

Expected<std::unique_ptr<PreTokenizer>> BuildPreTokenizer(const json& j) {
  const std::string type = TypeOf(j);
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (type == "Sequence") {
    std::vector<Ptr> steps;
    for (const auto& s : j.at("pretokenizers")) {
      RADIX_ASSIGN_OR_RETURN(auto p, BuildPreTokenizer(s));
      steps.push_back(std::move(p));
    }
    return Ptr(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "ByteLevel") {
    return Ptr(
        new ByteLevelPreTokenizer(j.value("add_prefix_space", true), j.value("use_regex", true)));
  }
  if (type == "Metaspace") {
    return Ptr(new MetaspacePreTokenizer(j.value("replacement", std::string("\xE2\x96\x81")),
                                         ParsePrependScheme(j), j.value("split", true)));
  }
  if (type == "Split") {
    RADIX_ASSIGN_OR_RETURN(auto pat, ParsePattern(j.at("pattern")));
    RADIX_ASSIGN_OR_RETURN(auto behavior, ParseBehavior(j.at("behavior").get<std::string>()));
    const bool invert = j.value("invert", false);
    if (!pat.first) return Ptr(new SplitPreTokenizer(pat.second, behavior, invert));
    RADIX_ASSIGN_OR_RETURN(auto re, Regex::Compile(pat.second));
    return Ptr(new SplitPreTokenizer(std::move(re), behavior, invert));
  }
  if (type == "Digits") {
    return Ptr(new CharSplitPreTokenizer(IsNumeric, j.value("individual_digits", false)
                                                        ? SplitBehavior::kIsolated
                                                        : SplitBehavior::kContiguous));
  }
  if (type == "Punctuation") {
    RADIX_ASSIGN_OR_RETURN(auto behavior,
                           ParseBehavior(j.value("behavior", std::string("Isolated"))));
    return Ptr(new CharSplitPreTokenizer(IsBertPunctuation, behavior));
  }
  if (type == "WhitespaceSplit") {
    return Ptr(new CharSplitPreTokenizer(IsWhitespace, SplitBehavior::kRemoved));
  }
  if (type == "Whitespace") {
    auto re = Regex::Compile("\\w+|[^\\w\\s]+");
    RADIX_CHECK(re.ok());
    return Ptr(new SplitPreTokenizer(std::move(re).value(), SplitBehavior::kRemoved, true));
  }
  if (type == "BertPreTokenizer") {
    std::vector<Ptr> steps;
    steps.push_back(Ptr(new CharSplitPreTokenizer(IsWhitespace, SplitBehavior::kRemoved)));
    steps.push_back(Ptr(new CharSplitPreTokenizer(IsBertPunctuation, SplitBehavior::kIsolated)));
    return Ptr(new SequencePreTokenizer(std::move(steps)));
  }
  return Unsupported("tokenizer.json pre_tokenizer '" + type + "' is not supported");
}

Expected<std::unique_ptr<Decoder>> BuildDecoder(const json& j) {
  const std::string type = TypeOf(j);
  using Ptr = std::unique_ptr<Decoder>;
  if (type == "Sequence") {
    std::vector<Ptr> steps;
    for (const auto& s : j.at("decoders")) {
      RADIX_ASSIGN_OR_RETURN(auto d, BuildDecoder(s));
      steps.push_back(std::move(d));
    }
    return Ptr(new SequenceDecoder(std::move(steps)));
  }
  if (type == "ByteLevel") return Ptr(new ByteLevelDecoder());
  if (type == "ByteFallback") return Ptr(new ByteFallbackDecoder());
  if (type == "Fuse") return Ptr(new FuseDecoder());
  if (type == "Metaspace") {
    return Ptr(new MetaspaceDecoder(j.value("replacement", std::string("\xE2\x96\x81")),
                                    ParsePrependScheme(j)));
  }
  if (type == "Strip") {
    return Ptr(new StripDecoder(j.at("content").get<std::string>(), j.value("start", 0),
                                j.value("stop", 0)));
  }
  if (type == "Replace") {
    RADIX_ASSIGN_OR_RETURN(auto pat, ParsePattern(j.at("pattern")));
    const std::string content = j.at("content").get<std::string>();
    if (!pat.first) return Ptr(new ReplaceDecoder(pat.second, content));
    RADIX_ASSIGN_OR_RETURN(auto re, Regex::Compile(pat.second));
    return Ptr(new ReplaceDecoder(std::move(re), content));
  }
  if (type == "WordPiece") {
    return Ptr(
        new WordPieceDecoder(j.value("prefix", std::string("##")), j.value("cleanup", true)));
  }
  if (type == "BPEDecoder") {
    return Ptr(new BpeSuffixDecoder(j.value("suffix", std::string("</w>"))));
  }
  return Unsupported("tokenizer.json decoder '" + type + "' is not supported");
}

// Vocabulary object {token: id} -> dense table (holes get empty spellings).
Vocab BuildVocab(const json& vocab) {
  std::vector<std::string> tokens;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = it.value().get<int64_t>();
    if (id < 0) continue;
    if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(id + 1);
    tokens[id] = it.key();
  }
  return Vocab(std::move(tokens));
}

Expected<std::unique_ptr<Model>> BuildModel(const json& j) {
  const std::string type = TypeOf(j).empty() && j.contains("merges") ? "BPE" : TypeOf(j);
  if (type == "BPE") {
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty()) {
        return Unsupported(std::string("BPE ") + key + " is not supported");
      }
    }
    Vocab vocab = BuildVocab(j.at("vocab"));
    BpeOptions opts;
    opts.byte_fallback = j.value("byte_fallback", false);
    opts.fuse_unk = j.value("fuse_unk", false);
    opts.ignore_merges = j.value("ignore_merges", false);
    if (j.contains("unk_token") && j.at("unk_token").is_string()) {
      opts.unk_id = vocab.Find(j.at("unk_token").get<std::string>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& m : j.at("merges")) {
      if (m.is_array() && m.size() == 2) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ', 1);
        if (space == std::string::npos) return DataLoss("malformed BPE merge '" + s + "'");
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else {
        return DataLoss("malformed BPE merge entry");
      }
    }
    RADIX_ASSIGN_OR_RETURN(auto model, BpeModel::FromMerges(std::move(vocab), merges, opts));
    return std::unique_ptr<Model>(new BpeModel(std::move(model)));
  }
  if (type == "WordPiece") {
    Vocab vocab = BuildVocab(j.at("vocab"));
    auto unk = vocab.Find(j.value("unk_token", std::string("[UNK]")));
    if (!unk) return DataLoss("WordPiece unk_token missing from the vocabulary");
    return std::unique_ptr<Model>(new WordPieceModel(
        std::move(vocab), *unk, j.value("continuing_subword_prefix", std::string("##")),
        j.value("max_input_chars_per_word", 100)));
  }
  if (type == "Unigram") {
    std::vector<std::pair<std::string, double>> pieces;
    for (const auto& entry : j.at("vocab")) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
          !entry[1].is_number()) {
        return DataLoss("malformed Unigram vocab entry");
      }
      pieces.emplace_back(entry[0].get<std::string>(), entry[1].get<double>());
    }
    std::optional<TokenId> unk;
    if (j.contains("unk_id") && j.at("unk_id").is_number_integer()) {
      const int64_t id = j.at("unk_id").get<int64_t>();
      if (id < 0 || static_cast<size_t>(id) >= pieces.size()) {
        return DataLoss("Unigram unk_id is outside the vocabulary");
      }
      unk = static_cast<TokenId>(id);
    }
    return std::unique_ptr<Model>(
        new UnigramModel(std::move(pieces), unk, j.value("byte_fallback", false)));
  }
  return Unsupported("tokenizer.json model '" + type + "' is not supported");
}

// Collapses a post_processor into the ids added before and after a single sequence.
Status BuildPostProcessor(const json& j, PostProcessor& post) {
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) RADIX_RETURN_IF_ERROR(BuildPostProcessor(p, post));
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "TemplateProcessing") {
    std::vector<TokenId> before, after;
    bool seen_sequence = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      const auto& special = j.at("special_tokens");
      if (!special.contains(name)) return DataLoss("template token '" + name + "' undefined");
      auto& target = seen_sequence ? after : before;
      for (const auto& id : special.at(name).at("ids")) target.push_back(id.get<TokenId>());
    }
    post.prefix.insert(post.prefix.begin(), before.begin(), before.end());
    post.suffix.insert(post.suffix.end(), after.begin(), after.end());
    if (j.contains("pair") && j.at("pair").is_array()) {
      post.pair.clear();
      for (const auto& item : j.at("pair")) {
        PairPiece piece;
        if (item.contains("Sequence")) {
          const std::string id = item.at("Sequence").at("id").get<std::string>();
          if (id != "A" && id != "B") return DataLoss("pair template sequence '" + id + "'");
          piece.kind = id == "A" ? PairPiece::Kind::kSequenceA : PairPiece::Kind::kSequenceB;
          piece.type_id = item.at("Sequence").value("type_id", 0);
        } else {
          const std::string name = item.at("SpecialToken").at("id").get<std::string>();
          const auto& special = j.at("special_tokens");
          if (!special.contains(name)) return DataLoss("template token '" + name + "' undefined");
          for (const auto& id : special.at(name).at("ids")) piece.ids.push_back(id.get<TokenId>());
          piece.type_id = item.at("SpecialToken").value("type_id", 0);
        }
        post.pair.push_back(std::move(piece));
      }
    }
    return Status::Ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const TokenId cls = j.at("cls").at(1).get<TokenId>();
    const TokenId sep = j.at("sep").at(1).get<TokenId>();
    post.prefix.insert(post.prefix.begin(), cls);
    post.suffix.push_back(sep);
    // BERT: [CLS] A [SEP] B [SEP], segments 0 then 1; RoBERTa: <s> A </s> </s> B </s>, one segment
    // (its models have a single token type).
    using K = PairPiece::Kind;
    if (type == "BertProcessing") {
      post.pair = {{K::kTokens, {cls}, 0},
                   {K::kSequenceA, {}, 0},
                   {K::kTokens, {sep}, 0},
                   {K::kSequenceB, {}, 1},
                   {K::kTokens, {sep}, 1}};
    } else {
      post.pair = {{K::kTokens, {cls}, 0},
                   {K::kSequenceA, {}, 0},
                   {K::kTokens, {sep, sep}, 0},
                   {K::kSequenceB, {}, 0},
                   {K::kTokens, {sep}, 0}};
    }
    return Status::Ok();
  }
  return Unsupported("tokenizer.json post_processor '" + type + "' is not supported");
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::optional<std::string> ConfigToken(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return std::nullopt;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> ParseTokenizerJson(const std::string& json_text,
                                                        const std::string& config_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return DataLoss("tokenizer.json is not valid JSON");
  try {
    Tokenizer::Parts parts;
    if (j.contains("normalizer") && !j.at("normalizer").is_null()) {
      RADIX_ASSIGN_OR_RETURN(parts.normalizer, BuildNormalizer(j.at("normalizer")));
    }
    if (j.contains("pre_tokenizer") && !j.at("pre_tokenizer").is_null()) {
      RADIX_ASSIGN_OR_RETURN(parts.pre_tokenizer, BuildPreTokenizer(j.at("pre_tokenizer")));
    }
    RADIX_ASSIGN_OR_RETURN(auto model, BuildModel(j.at("model")));
    parts.model = std::move(model);
    if (j.contains("decoder") && !j.at("decoder").is_null()) {
      RADIX_ASSIGN_OR_RETURN(parts.decoder, BuildDecoder(j.at("decoder")));
    }
    if (j.contains("post_processor") && !j.at("post_processor").is_null()) {
      RADIX_RETURN_IF_ERROR(BuildPostProcessor(j.at("post_processor"), parts.post_processor));
    }
    std::vector<AddedToken> added;
    for (const auto& a : j.value("added_tokens", json::array())) {
      AddedToken t;
      t.id = a.at("id").get<TokenId>();
      t.content = a.at("content").get<std::string>();
      t.single_word = a.value("single_word", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.normalized = a.value("normalized", false);
      t.special = a.value("special", false);
      t.special_parse_only = t.special;
      added.push_back(std::move(t));
    }
    parts.added = AddedVocabulary(std::move(added));
    if (!config_text.empty()) {
      json config = json::parse(config_text, nullptr, false);
      if (!config.is_discarded() && config.is_object()) {
        auto lookup = [&](const std::string& s) -> std::optional<TokenId> {
          for (const auto& t : parts.added.tokens()) {
            if (t.content == s) return t.id;
          }
          return parts.model->vocab().Find(s);
        };
        if (auto bos = ConfigToken(config, "bos_token")) parts.bos_id = lookup(*bos);
        if (auto eos = ConfigToken(config, "eos_token")) {
          if (auto id = lookup(*eos)) parts.eos_ids.push_back(*id);
        }
      }
    }
    return std::make_unique<Tokenizer>(std::move(parts));
  } catch (const json::exception& e) {
    return DataLoss(std::string("tokenizer.json: unexpected structure: ") + e.what());
  }
}

Expected<std::unique_ptr<Tokenizer>> LoadTokenizerJson(const std::string& json_path) {
  RADIX_ASSIGN_OR_RETURN(auto text, ReadFile(json_path));
  std::string config;
  const auto config_path = std::filesystem::path(json_path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    auto c = ReadFile(config_path.string());
    if (c.ok()) config = std::move(c).value();
  }
  return ParseTokenizerJson(text, config);
}

Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path json_path = fs::path(path) / "tokenizer.json";
    if (fs::exists(json_path, ec)) return LoadTokenizerJson(json_path.string());
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".gguf") return LoadGgufTokenizer(entry.path().string());
    }
    return NotFound("no tokenizer.json or .gguf file in " + path);
  }
  if (!fs::exists(path, ec)) return NotFound("tokenizer path does not exist: " + path);
  if (fs::path(path).extension() == ".gguf") return LoadGgufTokenizer(path);
  return LoadTokenizerJson(path);
}

}  // namespace radixserve::tokenizer
