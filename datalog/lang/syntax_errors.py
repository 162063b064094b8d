"""Syntax errors in plain words: a lark error becomes one `DatalogSyntaxError`.

Layer: datalog (language). Imports `lark`, `datalog.lang.ast`, `datalog.lang.errors`,
`datalog.lang.grammar` and `datalog.lang.source_text`.

Positions come from one scan of the text (`SourceText`: where strings and comments
lie, bracket depths), so explaining an error costs time linear in the text, with a
small constant, however long it is. The catalogue is parsed once per process.
"""

from __future__ import annotations

import functools
import re

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from datalog.lang import ast
from datalog.lang.errors import DatalogSyntaxError, did_you_mean
from datalog.lang.grammar import lark_parser, span_of
from datalog.lang.source_text import SourceText, span_at

# --- syntax errors ---------------------------------------------------------------------
#
# A lark error becomes one DatalogSyntaxError, trying in order: problems visible
# in the raw text (strings, comments, unknown directives, brackets), the catalogue
# of malformed snippets below (matched by parser state, as lark's `match_examples`
# does), rules on what the parser would have accepted, and finally a plain
# "unexpected X; expected Y" in words rather than terminal names.

_DIRECTIVES = (
    *(".decl", ".type", ".functor", ".input", ".output", ".printsize", ".pragma"),
    *(".comp", ".init", ".override"),
)
_UNSUPPORTED = frozenset((".plan", ".include", ".limitsize", ".number_type"))
_UNSUPPORTED_MESSAGES = {
    ".lattice": "the Soufflé directive `.lattice` (lattice types) is not supported",
}
# `#include`, `#define`..., and the line markers `# 12 "file.dl"` that `cpp` leaves.
_PREPROCESSOR = re.compile(
    r"#[ \t]*(include|define|undef|ifdef|ifndef|if|elif|else|endif|pragma|line|error|warning"
    r"|[0-9]+)\b"
)
_STARTS = frozenset({"_DECL", "_TYPE", "_FUNCTOR", "_PRAGMA", "DIRECTIVE", "_COMP", "_INIT"})
_STATEMENT_START = frozenset({"NAME", "QNAME", "_OVERRIDE", "$END", *_STARTS})
_CLOSING = frozenset({"_DOT", "_IF", "_OVERRIDE", "$END", *_STARTS})
_TERM_START = frozenset(
    {"NAME", "QNAME", "INT", "IPV4", "UNSIGNED", "FLOAT", "STRING", "WILDCARD", "FUNCTOR_NAME"}
)

MISSING_DOT = "missing `.` at the end of a rule"
AFTER_HEAD = "expected `:-` or `.` after the head"

# (message, snippets): whole statements, tried first and after another statement.
STATEMENT_ERRORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "a `.decl` needs a column list like `(x: number)`",
        (".decl edge\n", ".decl edge x: number", ".decl a, b\n"),
    ),
    (
        "a column needs a type, like `x: number`",
        (".decl edge(x, y: number)", ".decl edge(x)", ".decl edge(x: number, y)"),
    ),
    (
        "expected a type name such as `number` or `symbol`",
        (".decl e(x: )", ".decl e(x: number, y: )", ".type T <: 1", ".type T = A | 1"),
    ),
    (
        "a `.type` needs `<:` or `=` and a base type, like `.type Id <: number`",
        (".type T\n", ".type T number"),
    ),
    (AFTER_HEAD, ("a(x) b(x).", "a() b().", "a(x), b(x) c(x).")),
    ("a rule needs a body after `:-`", ("a(x) :- .", "a(x) :- ", "a(x), b(x) :- .")),
    (
        'an option needs a value, like `filename="edge.facts"`',
        (".input e(filename)", ".input e(filename=)", '.input e(a="x", b)'),
    ),
    ("a directive needs a relation name, like `.output reach`", (".output\n", ".output (x)")),
)

# (message, snippets): rule bodies, also tried after one and two other literals.
BODY_ERRORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("expected a literal after `,`", ("b(x), .", "b(x), ;", "b(x),")),
    ("expected a literal after `;`", ("b(x); .", "b(x); ,", "b(x);")),
    ("`!` must be followed by an atom, like `!edge(x, y)`", ("!x = 1.", "!(b(x)).", "!!b(x).")),
    (
        "an aggregate needs `:` before its body, like `count : { edge(x, _) }`",
        ("n = count { b(x) }.", "n = count(x).", "n = sum x { b(x) }."),
    ),
    (
        "an aggregate body is `{ ... }` or an atom, like `count : { edge(x, _) }`",
        ("n = count : x.", "n = count : 1.", "n = sum x : y."),
    ),
    ("expected a term after the operator", ("y = x + .", "y = x * ,", "y = 2 ^ .", "y = x band .")),
    ("expected a term after the comparison operator", ("y = .", "y < ;", "y != ,")),
    (
        "a literal is an atom like `edge(x, y)` or a comparison like `x = y`",
        ("x.", "x, b(x).", "1.", '"s".', "x + 1.", "_."),
    ),
    ('`contains` and `match` take two arguments, like `contains("a", s)`', ("contains(x).",)),
)


def explain(error: UnexpectedInput, source: SourceText, start: str) -> DatalogSyntaxError:
    text = source.text
    position = error.pos_in_stream if isinstance(error, UnexpectedCharacters) else None
    if isinstance(error, UnexpectedToken) and error.token.type in ("_DOT", "SLASH"):
        position = error.token.start_pos
    where = position if position is not None else getattr(error, "pos_in_stream", None)
    found = _feature_problem(text, where) if where is not None else None
    if found is None and position is not None:
        found = _text_problem(text, position, error)
    if found is None and isinstance(error, UnexpectedToken):
        found = _token_problem(error, source, start)
    if found is None:
        found = _bad_character(text, error)
    message, span = found
    return DatalogSyntaxError(message, span, text)


# Soufflé features outside the core language, recognized where parsing stops.
_FEATURES: tuple[tuple[str, int, str], ...] = (  # (text, its offset from the stop, message)
    ("[", 0, "records (`[a, b]`) are not supported; use more columns"),
    ("$", 0, "algebraic data types (`$Branch(...)`) are not supported"),
    ("{", 0, "algebraic data types (`.type T = A {...} | B {...}`) are not supported"),
    ("choice-domain", -6, "`choice-domain` is not supported"),
)


def _feature_problem(text: str, pos: int) -> tuple[str, ast.Span] | None:
    for feature, offset, message in _FEATURES:
        at = pos + offset
        if feature == "{" and not re.search(r"\.type\b[^.]*$", text[:pos]):
            continue  # a brace outside a `.type`: an aggregate's body, say
        if at >= 0 and text.startswith(feature, at):
            return message, span_at(text, at, len(feature))
    return None


def _text_problem(text: str, pos: int, error: UnexpectedInput) -> tuple[str, ast.Span] | None:
    """Problems seen in the raw text at `pos`: comments, strings, directives."""
    if text.startswith("/*", pos):
        return "unterminated comment: `/*` has no closing `*/`", span_at(text, pos, 2)
    if text.startswith('"', pos):
        return _bad_string(text, pos)
    directive = _PREPROCESSOR.match(text, pos)
    if directive and not text[text.rfind("\n", 0, pos) + 1 : pos].strip():
        return _preprocessor_problem(text, directive)
    word = re.match(r"\.[A-Za-z_]\w*", text[pos:])
    expected = set(getattr(error, "expected", None) or getattr(error, "allowed", None) or ())
    if word and "_DECL" in expected:
        name = word.group()
        span = span_at(text, pos, len(name))
        if name in _UNSUPPORTED_MESSAGES:
            return _UNSUPPORTED_MESSAGES[name], span
        if name in _UNSUPPORTED:
            return f"the Soufflé directive `{name}` is not supported", span
        return f"unknown directive `{name}`{did_you_mean(name, _DIRECTIVES)}", span
    return None


def _preprocessor_problem(text: str, directive: re.Match[str]) -> tuple[str, ast.Span]:
    """A C preprocessor line: Soufflé runs `mcpp` over its input, Deltalog does not."""
    kind = "line marker" if directive.group(1).isdigit() else "directive"
    message = (
        f"the C preprocessor {kind} `{directive.group()}` is not supported: "
        "run the program through `mcpp` or `cpp -P` first"
    )
    return message, span_at(text, directive.start(), directive.end() - directive.start())


def _bad_string(text: str, pos: int) -> tuple[str, ast.Span]:
    escape = re.compile(r'"(?:[^"\\\n]|\\["\\ntr])*(\\.?)').match(text, pos)
    if escape and escape.group(1):
        where = escape.start(1)
        bad = escape.group(1)
        message = f'unknown escape `{bad}` in a string; use `\\"`, `\\\\`, `\\n`, `\\t` or `\\r`'
        return message, span_at(text, where, len(bad))
    message = 'unterminated string: a string must end with `"` on the same line'
    return message, span_at(text, pos, 1)


def _bad_character(text: str, error: UnexpectedInput) -> tuple[str, ast.Span]:
    pos = error.pos_in_stream or 0
    char = text[pos] if pos < len(text) else ""
    return f"unexpected character `{char}`", span_at(text, pos, 1)


def _token_problem(error: UnexpectedToken, source: SourceText, start: str) -> tuple[str, ast.Span]:
    token, text = error.token, source.text
    pos = len(text) if token.type == "$END" else token.start_pos or 0
    accepts = error.accepts or error.expected
    underscored = _underscored_number(text, token)
    if underscored is not None:
        return underscored
    unbalanced = _bracket_problem(source, pos, token.type, accepts)
    if unbalanced is not None:
        return unbalanced
    message = _match_examples(error, start) or _accepts_rule(source, pos, token, accepts)
    if message == AFTER_HEAD and token.type == "$END":
        message = "missing `.` at the end of a fact"
    if message is not None:
        return message, _missingspan_of(source, pos, token)
    wanted = _join(_expected_phrases(accepts))
    message = f"unexpected {_describe(token)}; expected {wanted}"
    if token.type == "$END":
        return message, _missingspan_of(source, pos, token)
    return message, span_of(token, text)


# A number the lexer stopped reading at `_` (`1_000` is `1` then the name `_000`).
_NUMBER_BEFORE = re.compile(r"(?:0[xX][0-9a-fA-F]*|0[bB][01]*|[0-9][0-9.eE]*)\Z")
_NUMBER_AFTER = re.compile(r"[0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?")


def _underscored_number(text: str, token: Token) -> tuple[str, ast.Span] | None:
    """`1_000`: Soufflé's lexer reads no `_` in a number, and neither does Deltalog."""
    pos = token.start_pos or 0
    if token.type != "NAME" or not str(token).startswith("_"):
        return None
    before = _NUMBER_BEFORE.search(text[max(0, pos - 64) : pos])
    if before is None:
        return None
    start = pos - len(before.group())
    end = _NUMBER_AFTER.match(text, pos).end()  # type: ignore[union-attr]
    written = text[start:end]
    digits = written.replace("_", "")
    message = f"`{written}`: a number cannot contain `_`; write `{digits}`"
    return message, span_at(text, start, end - start)


def _bracket_problem(
    source: SourceText, pos: int, token_type: str, accepts: set[str]
) -> tuple[str, ast.Span] | None:
    text = source.text
    parens, braces = source.depths_at(pos)
    if token_type == "_RPAR" and parens <= 0:
        return "unbalanced parenthesis: this `)` has no matching `(`", span_at(text, pos, 1)
    if token_type == "_RBRACE" and braces <= 0:
        return "unbalanced braces: this `}` has no matching `{`", span_at(text, pos, 1)
    later = token_type in ("NAME", "QNAME") and source.on_later_line(pos)
    closing = token_type in _CLOSING or text.startswith(":-", pos) or later
    if closing and parens > 0 and "_RPAR" in accepts:
        return "unbalanced parenthesis: missing `)`", source.after_previous(pos)
    if closing and braces > 0 and "_RBRACE" in accepts:
        return "unbalanced braces: missing `}`", source.after_previous(pos)
    return None


def _accepts_rule(source: SourceText, pos: int, token: Token, accepts: set[str]) -> str | None:
    """Messages that follow from what the parser would have taken instead."""
    if "_IF" in accepts:
        return AFTER_HEAD
    ends = token.type in _STATEMENT_START or token.type == "_RBRACE"  # `}`: a component's end
    if "_DOT" in accepts and (ends or source.on_later_line(pos)):
        return MISSING_DOT
    if "_COMMA" in accepts and token.type in _TERM_START and source.depths_at(pos)[0] > 0:
        return "missing `,` between arguments"
    return None


_Failure = tuple[int, int, frozenset[str], str]


def _failure(error: UnexpectedToken) -> _Failure:
    """Where a parse stopped: stack depth, LALR state, acceptable terminals, token."""
    state = error.state
    accepts = frozenset(error.accepts or ())
    return len(state.state_stack), state.position, accepts, error.token.type


def _match_examples(error: UnexpectedToken, start: str) -> str | None:
    """The message of the catalogue snippet that fails like `error` does.

    The algorithm of `UnexpectedInput.match_examples(parse, catalogue, True)`, with
    the snippets' failures computed once; also, lark 1.3.1's own version raises
    TypeError (it formats a ParserState with `%d`) when two states agree but their
    accepts differ. Same stack, state and accepts match; the same token wins.
    """
    failure = _failure(error)
    fallback = None
    for known, message in _known_failures(lark_parser(), start):
        if known[:3] == failure[:3]:
            if known[3] == failure[3]:
                return message
            fallback = fallback or message
    return fallback


@functools.cache
def _known_failures(parser: Lark, start: str) -> tuple[tuple[_Failure, str], ...]:
    """The catalogue's failures under `parser`: LALR state numbers differ from one
    build of the tables to another (and a cached build is another), so they are
    computed per parser, never carried over to a rebuilt one."""
    found = []
    for message, snippets in _catalogue(start):
        for snippet in snippets:
            try:
                parser.parse(snippet, start=start)
            except UnexpectedToken as error:
                found.append((_failure(error), message))
    return tuple(found)


@functools.cache
def _catalogue(start: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The snippets as `match_examples` wants them, in each context that changes
    the parser's stack: first statement or a later one, first literal or later."""
    before = ("", "q(x), ", "q(x), r(x), ")
    bodies = [(m, tuple(b + s for s in snippets for b in before)) for m, snippets in BODY_ERRORS]
    if start == "query":
        return tuple(bodies)
    rules = [(m, tuple(f"h(x) :- {s}" for s in snippets)) for m, snippets in bodies]
    statements = [*STATEMENT_ERRORS, *rules]
    return tuple((m, tuple(p + s for s in ss for p in ("", "p(1).\n"))) for m, ss in statements)


# --- wording and positions --------------------------------------------------------------

# How terminals read in "expected ..." (punctuation reads as itself) and tokens
# in "unexpected ...".
_TOKEN_KINDS = {"NAME": "name", "QNAME": "name", "STRING": "string"}
_TOKEN_KINDS.update(dict.fromkeys(("INT", "UNSIGNED", "FLOAT", "IPV4"), "number"))
_PHRASES = {name: f"a {kind}" for name, kind in _TOKEN_KINDS.items()}
_PHRASES.update(dict.fromkeys(("PLUS", "MINUS", "STAR", "SLASH", "PERCENT"), "an operator"))
_PHRASES.update(dict.fromkeys(("CARET", "BITWISE"), "an operator"))
_PHRASES.update(dict.fromkeys(("COUNT", "AGGREGATE_FUNCTION"), "an aggregate"))
_PHRASES.update(
    {
        "WILDCARD": "`_`",
        "BUILTIN": "`contains` or `match`",
        "COMPARE": "a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`)",
        "QUALIFIER": "a qualifier such as `btree`",
        "STATEFUL": "`stateful`",
        "FUNCTOR_NAME": "a functor call like `@f(x)`",
        "DIRECTIVE": "`.input`, `.output` or `.printsize`",
        "AS": "`as(x, type)`",
        "LINE_COMMENT": "a comment",
        "BLOCK_COMMENT": "a comment",
        "$END": "end of input",
    }
)
_TERM_TERMINALS = frozenset(_TERM_START | {"COUNT", "AGGREGATE_FUNCTION", "MINUS", "_LPAR", "AS"})


def _expected_phrases(accepts: set[str]) -> list[str]:
    names = set(accepts)
    phrases: list[str] = []
    if "_DECL" in names:
        names -= _STATEMENT_START - {"_PRAGMA"}
        phrases += ["a declaration", "a directive", "a rule"]
    elif {"NAME", "INT", "STRING"} <= names:
        literal = "_BANG" in names
        names -= _TERM_TERMINALS | ({"_BANG", "BUILTIN"} if literal else set())
        phrases.append("a literal" if literal else "a term")
    words = [phrase(n) for n in names]
    for word in sorted(words, key=lambda w: (not w.startswith("`"), w)):
        if word not in phrases:
            phrases.append(word)
    return phrases


def phrase(terminal: str) -> str:
    """How the terminal named `terminal` reads in "expected ...": its phrase, or the
    text of a punctuation terminal; never a regular expression or a terminal name."""
    if terminal in _PHRASES:
        return _PHRASES[terminal]
    pattern = lark_parser().get_terminal(terminal).pattern
    if isinstance(pattern, PatternStr):
        return f"`{pattern.value}`"
    if terminal.startswith("__IGNORE"):
        return "blank space"
    words = terminal.strip("_").lower().replace("_", " ")  # a terminal added later
    return ("an " if words[:1] in tuple("aeiou") else "a ") + words


def _join(phrases: list[str]) -> str:
    if len(phrases) <= 1:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _describe(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    kind = _TOKEN_KINDS.get(token.type)
    return f"{kind} `{token}`" if kind else f"`{token}`"


def _missingspan_of(source: SourceText, pos: int, token: Token) -> ast.Span:
    if token.type == "$END" or source.on_later_line(pos):
        return source.after_previous(pos)
    return span_of(token, source.text)
