#include "sampling/ebnf_to_lark.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "tokenizer/utf8.h"

namespace radixserve::sampling {
namespace {

constexpr int kUnbounded = -1;

struct Node {
  enum class Kind { kLiteral, kClass, kAny, kRef, kSequence, kAlternatives, kRepeat };
  Kind kind = Kind::kSequence;
  std::u32string text;                                // kLiteral
  bool negated = false;                               // kClass
  std::vector<std::pair<char32_t, char32_t>> ranges;  // kClass, inclusive
  std::string name;                                   // kRef
  std::vector<Node> children;     // kSequence, kAlternatives; kRepeat: exactly one
  int min = 0, max = kUnbounded;  // kRepeat
};

struct Rule {
  std::string name;
  Node body;
  bool terminal = false;
};

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<std::vector<Rule>> Parse() {
    std::vector<Rule> rules;
    SkipSpace();
    while (!AtEnd()) {
      Rule rule;
      rule.name = ParseName();
      if (rule.name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (text_.substr(pos_, 3) != "::=") return Error("expected '::=' after '" + rule.name + "'");
      pos_ += 3;
      RADIX_ASSIGN_OR_RETURN(rule.body, ParseAlternatives(/*nested=*/false));
      rules.push_back(std::move(rule));
      SkipSpace();
    }
    return rules;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  Status Error(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    return InvalidArgument("ebnf grammar, line " + std::to_string(line) + ": " + what);
  }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // `name ::=` starts at pos_: the current rule has ended.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  Expected<Node> ParseAlternatives(bool nested) {
    Node alts;
    alts.kind = Node::Kind::kAlternatives;
    while (true) {
      RADIX_ASSIGN_OR_RETURN(auto seq, ParseSequence(nested));
      alts.children.push_back(std::move(seq));
      SkipSpace();
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alts.children.size() == 1) return std::move(alts.children.front());
    return alts;
  }

  Expected<Node> ParseSequence(bool nested) {
    Node seq;
    seq.kind = Node::Kind::kSequence;
    while (true) {
      SkipSpace();
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || (!nested && AtRuleStart())) break;
      RADIX_ASSIGN_OR_RETURN(auto element, ParseElement());
      RADIX_ASSIGN_OR_RETURN(auto repeated, ParseRepeat(std::move(element)));
      seq.children.push_back(std::move(repeated));
    }
    if (seq.children.size() == 1) return std::move(seq.children.front());
    return seq;
  }

  Expected<Node> ParseElement() {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '(') {
      if (text_.substr(pos_, 2) == "(=") {
        return Error("lookahead assertions '(= ...)' are not supported");
      }
      ++pos_;
      auto group = ParseAlternatives(/*nested=*/true);
      if (!group.ok()) return group;
      SkipSpace();
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      return group;
    }
    Node node;
    if (c == '.') {
      ++pos_;
      node.kind = Node::Kind::kAny;
      return node;
    }
    if (IsNameChar(c)) {
      node.kind = Node::Kind::kRef;
      node.name = ParseName();
      return node;
    }
    return Error(std::string("unexpected character '") + c + "'");
  }

  Expected<Node> ParseRepeat(Node element) {
    SkipSpaceOnLine();
    int min = 0, max = kUnbounded;
    const char c = Peek();
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      min = 1;
    } else if (c == '?') {
      ++pos_;
      max = 1;
    } else if (c == '{') {
      ++pos_;
      SkipSpace();
      if (Peek() != ',') {
        RADIX_ASSIGN_OR_RETURN(auto n, ParseInt());
        min = max = n;
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
        max = kUnbounded;
        if (Peek() != '}') {
          RADIX_ASSIGN_OR_RETURN(max, ParseInt());
        }
        SkipSpace();
      }
      if (Peek() != '}') return Error("expected '}' in a repetition");
      ++pos_;
      if (max != kUnbounded && max < min) return Error("repetition maximum below its minimum");
    } else {
      return element;
    }
    Node repeat;
    repeat.kind = Node::Kind::kRepeat;
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(element));
    return repeat;
  }

  void SkipSpaceOnLine() {
    while (Peek() == ' ' || Peek() == '\t') ++pos_;
  }

  Expected<int> ParseInt() {
    int value = 0;
    const size_t start = pos_;
    while (std::isdigit(static_cast<unsigned char>(Peek()))) {
      if (value > 100000) return Error("repetition count too large");
      value = value * 10 + (Peek() - '0');
      ++pos_;
    }
    if (pos_ == start) return Error("expected a number in a repetition");
    return value;
  }

  Expected<char32_t> ParseHex(size_t digits) {
    if (pos_ + digits > text_.size()) return Error("incomplete escape");
    char32_t value = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char c = text_[pos_++];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= static_cast<char32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value |= static_cast<char32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        value |= static_cast<char32_t>(c - 'A' + 10);
      } else {
        return Error("bad hex digit in an escape");
      }
    }
    if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
      return Error("escape is not a Unicode scalar value");
    }
    return value;
  }

  // One character of a literal or class, escapes resolved.
  Expected<char32_t> ParseChar() {
    if (AtEnd()) return Error("unterminated literal or character class");
    if (Peek() != '\\') {
      char32_t cp = 0;
      if (!tokenizer::DecodeUtf8(text_, pos_, cp)) return Error("invalid UTF-8");
      return cp;
    }
    ++pos_;
    if (AtEnd()) return Error("incomplete escape");
    const char c = text_[pos_++];
    switch (c) {
      case 'n':
        return U'\n';
      case 'r':
        return U'\r';
      case 't':
        return U'\t';
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<char32_t>(c);
      case 'x':
        return ParseHex(2);
      case 'u':
        return ParseHex(4);
      case 'U':
        return ParseHex(8);
      default:
        --pos_;
        return Error(std::string("unknown escape '\\") + c + "'");
    }
  }

  Expected<Node> ParseLiteral() {
    ++pos_;  // opening quote
    Node literal;
    literal.kind = Node::Kind::kLiteral;
    while (true) {
      if (AtEnd()) return Error("unterminated string literal");
      if (Peek() == '"') {
        ++pos_;
        break;
      }
      RADIX_ASSIGN_OR_RETURN(auto cp, ParseChar());
      literal.text.push_back(cp);
    }
    return literal;
  }

  Expected<Node> ParseClass() {
    ++pos_;  // '['
    Node cls;
    cls.kind = Node::Kind::kClass;
    if (Peek() == '^') {
      cls.negated = true;
      ++pos_;
    }
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      RADIX_ASSIGN_OR_RETURN(auto lo, ParseChar());
      char32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        RADIX_ASSIGN_OR_RETURN(auto end, ParseChar());
        if (end < lo) return Error("character range out of order");
        hi = end;
      }
      cls.ranges.emplace_back(lo, hi);
    }
    if (cls.ranges.empty() && !cls.negated) return Error("empty character class");
    return cls;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// --- Lark output ---------------------------------------------------------------------------

std::string Hex(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(cp));
  return buf;
}

// A JSON-syntax string, as llguidance's Lark reads literals.
std::string LarkString(const std::u32string& text) {
  std::string out = "\"";
  for (char32_t cp : text) {
    if (cp == U'"' || cp == U'\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp < 0x20 || cp == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(cp));
      out += buf;
    } else {
      tokenizer::AppendUtf8(out, cp);
    }
  }
  return out + "\"";
}

std::string LarkClass(const Node& cls) {
  if (cls.ranges.empty()) return "/(?s:.)/";  // [^]
  std::string out = cls.negated ? "/[^" : "/[";
  for (const auto& [lo, hi] : cls.ranges) {
    out += Hex(lo);
    if (hi != lo) {
      out += '-';
      out += Hex(hi);
    }
  }
  return out + "]/";
}

class Emitter {
 public:
  explicit Emitter(const std::map<std::string, std::string>& names) : names_(names) {}

  std::string Emit(const Node& node) const {
    switch (node.kind) {
      case Node::Kind::kLiteral:
        return LarkString(node.text);
      case Node::Kind::kClass:
        return LarkClass(node);
      case Node::Kind::kAny:
        return "/(?s:.)/";
      case Node::Kind::kRef:
        return names_.at(node.name);
      case Node::Kind::kSequence: {
        if (node.children.empty()) return "\"\"";
        std::string out;
        for (const Node& child : node.children) {
          if (!out.empty()) out += ' ';
          out += child.kind == Node::Kind::kAlternatives ? Parenthesized(child) : Emit(child);
        }
        return out;
      }
      case Node::Kind::kAlternatives: {
        std::string out;
        for (const Node& child : node.children) {
          if (!out.empty()) out += " | ";
          out += Emit(child);
        }
        return out;
      }
      case Node::Kind::kRepeat: {
        const Node& inner = node.children.front();
        if (node.max == 0) return "\"\"";
        std::string out = Atomic(inner);
        if (node.min == 0 && node.max == kUnbounded) return out + "*";
        if (node.min == 1 && node.max == kUnbounded) return out + "+";
        if (node.min == 0 && node.max == 1) return out + "?";
        out += '{';
        out += std::to_string(node.min);
        if (node.max != node.min) {
          out += ",";
          if (node.max != kUnbounded) out += std::to_string(node.max);
        }
        return out + "}";
      }
    }
    return {};
  }

 private:
  // The operand of a repeat.
  std::string Atomic(const Node& node) const {
    const bool compound = (node.kind == Node::Kind::kSequence && node.children.size() > 1) ||
                          node.kind == Node::Kind::kAlternatives ||
                          node.kind == Node::Kind::kRepeat;
    return compound ? Parenthesized(node) : Emit(node);
  }

  std::string Parenthesized(const Node& node) const {
    std::string out = "(";
    out += Emit(node);
    out += ')';
    return out;
  }

  const std::map<std::string, std::string>& names_;
};

bool IsTerminal(const Node& node, const std::map<std::string, const Rule*>& rules) {
  switch (node.kind) {
    case Node::Kind::kLiteral:
    case Node::Kind::kClass:
    case Node::Kind::kAny:
      return true;
    case Node::Kind::kRef:
      return rules.at(node.name)->terminal;
    default:
      for (const Node& child : node.children) {
        if (!IsTerminal(child, rules)) return false;
      }
      return true;
  }
}

Status CheckRefs(const Node& node, const std::map<std::string, const Rule*>& rules) {
  if (node.kind == Node::Kind::kRef && !rules.count(node.name)) {
    return InvalidArgument("ebnf grammar: rule '" + node.name + "' is used but not defined");
  }
  for (const Node& child : node.children) RADIX_RETURN_IF_ERROR(CheckRefs(child, rules));
  return Status::Ok();
}

// A Lark name for a GBNF rule: lower case for rules, upper case for tokens, unique.
std::string LarkName(const std::string& gbnf, bool terminal, std::set<std::string>& used) {
  std::string base;
  for (char c : gbnf) {
    base += std::isalnum(static_cast<unsigned char>(c))
                ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                : '_';
  }
  if (!std::islower(static_cast<unsigned char>(base[0]))) base.insert(0, "r_");
  if (terminal) {
    for (char& c : base) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  std::string name = base;
  for (int i = 2; used.count(name); ++i) {
    name = base;
    name += '_';
    name += std::to_string(i);
  }
  used.insert(name);
  return name;
}

}  // namespace

bool LooksLikeLark(std::string_view grammar) {
  if (grammar.substr(0, 11) == "%llguidance" || grammar.substr(0, 6) == "start:") return true;
  return grammar.find("\n%llguidance") != std::string_view::npos ||
         grammar.find("\nstart:") != std::string_view::npos;
}

Expected<std::string> ConvertEbnfToLark(std::string_view grammar) {
  if (LooksLikeLark(grammar)) return std::string(grammar);
  RADIX_ASSIGN_OR_RETURN(auto parsed, Parser(grammar).Parse());
  std::vector<Rule>& rules = parsed;

  std::map<std::string, const Rule*> by_name;
  for (const Rule& rule : rules) {
    if (!by_name.emplace(rule.name, &rule).second) {
      return InvalidArgument("ebnf grammar: rule '" + rule.name + "' is defined twice");
    }
  }
  if (!by_name.count("root")) return InvalidArgument("ebnf grammar: no 'root' rule");
  for (const Rule& rule : rules) RADIX_RETURN_IF_ERROR(CheckRefs(rule.body, by_name));

  // Least fixed point: recursive rules never become tokens (lexer tokens must be regular).
  for (bool changed = true; changed;) {
    changed = false;
    for (Rule& rule : rules) {
      if (rule.name != "root" && !rule.terminal && IsTerminal(rule.body, by_name)) {
        rule.terminal = changed = true;
      }
    }
  }

  std::set<std::string> used = {"start"};
  std::map<std::string, std::string> names = {{"root", "start"}};
  for (const Rule& rule : rules) {
    if (rule.name != "root") names[rule.name] = LarkName(rule.name, rule.terminal, used);
  }
  const Emitter emitter(names);
  std::string out;
  for (const Rule& rule : rules) {
    out += names.at(rule.name) + ": " + emitter.Emit(rule.body) + "\n";
  }
  return out;
}

}  // namespace radixserve::sampling
