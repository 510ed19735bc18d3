// ConvertEbnfToLark: SGLang's `ebnf` grammars (the GBNF dialect of llama.cpp and xgrammar) to the
// Lark dialect llguidance compiles, as SGLang's llguidance backend does before compiling.
//
// Accepted GBNF:
//   rule      ::= name "::=" alternatives     one rule per definition; a rule may span lines
//                                             (it ends where the next `name ::=` starts)
//   name      [A-Za-z0-9_-]+; the grammar starts at `root` (required)
//   elements  "literal" with escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH (code points)
//             [class] / [^class] with ranges a-z and the same escapes (plus \- \^)
//             .  (any character)    name (a rule)    ( alternatives )
//   repeats   *  +  ?  {n}  {n,}  {n,m}
//   comments  # to the end of the line
// Not accepted (an error naming it): lookahead assertions `(= ...)`, undefined rules, a missing
// root, malformed escapes or classes.
//
// Semantics follow llguidance's own converter: a rule whose expansion uses only literals,
// classes and other such rules (and no recursion) becomes a lexer token, matched greedily
// (longest match) like every llguidance lexeme; other rules stay grammar rules. Grammars whose
// terminal rules can swallow the start of what follows them therefore accept less than xgrammar
// (a character-level parser) would -- the same as SGLang with --grammar-backend llguidance.
//
// A text that is already Lark (it starts with `%llguidance`, or a line starts with `start:`)
// is returned unchanged. Pure function; any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace radixserve::sampling {

// True when `grammar` is llguidance Lark rather than GBNF (see above).
bool LooksLikeLark(std::string_view grammar);

// Errors are kInvalidArgument with the line and the problem.
Expected<std::string> ConvertEbnfToLark(std::string_view grammar);

}  // namespace radixserve::sampling
