"""The language front end: Datalog text to the AST of `datalog.ast`.

Layer: datalog (language). Imports `lark`, `datalog.ast` and `datalog.errors`;
nothing from the engine. `grammar.lark` is loaded once, as an LALR parser with
two start symbols (`program`, `query`). The transformer below only builds AST
nodes; checks run later as passes. Every syntax problem is raised as a
`DatalogSyntaxError` with a plain-words message; lark's exceptions never escape.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.tree import Meta

from datalog import ast
from datalog.errors import DatalogSyntaxError, did_you_mean

__all__ = ["parse_program", "parse_query"]

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")

_DirectiveKind = Literal["input", "output", "printsize"]
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


def parse_program(text: str) -> ast.Program:
    """Parse a whole source text: declarations, directives, facts and rules."""
    return cast(ast.Program, _built(text, "program"))


def parse_query(text: str) -> ast.Query:
    """Parse a query: a body such as `reach(1, y)`; a trailing `.` is optional."""
    return cast(ast.Query, _built(text, "query"))


def _built(text: object, start: str) -> ast.Program | ast.Query:
    if not isinstance(text, str):
        raise DatalogSyntaxError(f"Datalog text must be a string, not {type(text).__name__}")
    try:
        return cast(ast.Program | ast.Query, _Builder(text).transform(_parse(text, start)))
    except RecursionError:
        raise DatalogSyntaxError("the text is nested too deeply to parse") from None


@functools.cache
def _lark() -> Lark:
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        start=["program", "query"],
        cache=_grammar_cache(),
    )


def _grammar_cache() -> str | bool:
    """Where lark keeps the built LALR tables (the first parse: 80 ms -> 10 ms).

    A private directory of the user's cache (the tables are pickled, so never a
    shared temporary directory); False (build every time) when there is none.
    Lark checks the grammar's digest stored in the file and rebuilds on any mismatch.
    """
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(root) / "deltalog"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK):
        return False
    return str(folder / f"grammar-{sys.version_info[0]}.{sys.version_info[1]}.lark")


def _parse(text: str, start: str) -> Any:
    try:
        return _lark().parse(text, start=start)
    except UnexpectedInput as error:
        raise _explain(error, text, start) from None


# --- spans and literal values ------------------------------------------------------


def _span(where: Meta | Token) -> ast.Span:
    """The span of a tree node or a token (1-based line and column, 0-based offsets)."""
    if getattr(where, "empty", False):
        return ast.NOWHERE
    w = where
    return ast.Span(
        *(n or 0 for n in (w.line, w.column, w.end_line, w.end_column, w.start_pos, w.end_pos))
    )


def _unescape(quoted: str) -> str:
    """The value of a string literal `"..."` (escapes `\\" \\\\ \\n \\t \\r`)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], quoted[1:-1])


def _integer(text: str) -> int:
    return int(text, {"0x": 16, "0b": 2}.get(text[:2], 10))


class _Alternatives(NamedTuple):
    """A parsed `a, b ; c`: its alternatives, before the consumer shapes them."""

    conjunctions: tuple[tuple[ast.Literal, ...], ...]
    span: ast.Span

    def as_body(self) -> tuple[ast.Literal, ...]:
        """One alternative is a plain conjunction; several are one Disjunction."""
        if len(self.conjunctions) == 1:
            return self.conjunctions[0]
        return (ast.Disjunction(self.conjunctions, self.span),)


# --- the transformer -----------------------------------------------------------------


@v_args(meta=True)
class _Builder(Transformer[Token, Any]):
    """Builds AST nodes from the parse tree, bottom-up. No checks here."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    # programs and declarations

    def program(self, meta: Meta, items: list[Any]) -> ast.Program:
        flat = [node for item in items for node in (item if isinstance(item, list) else [item])]
        return ast.Program(
            decls=tuple(n for n in flat if isinstance(n, ast.Decl)),
            types=tuple(n for n in flat if isinstance(n, ast.TypeDecl)),
            directives=tuple(n for n in flat if isinstance(n, ast.Directive)),
            rules=tuple(n for n in flat if isinstance(n, ast.Rule)),
            source=self.source,
            pragmas=tuple(n for n in flat if isinstance(n, ast.Pragma)),
        )

    def pragma(self, meta: Meta, children: list[Any]) -> ast.Pragma:
        key, value = children
        text = "" if value is None else _unescape(value)
        return ast.Pragma(_unescape(key), text, _span(meta))

    def decl(self, meta: Meta, children: list[Any]) -> list[ast.Decl]:
        names, columns, *qualifiers = children
        semantics: ast.Semantics = "set"
        for qualifier in qualifiers:
            if qualifier in ("set", "multiset", "last_write_wins"):
                semantics = qualifier
        span = _span(meta)
        written = tuple(str(q) for q in qualifiers)
        return [ast.Decl(name, columns or (), semantics, span, written) for name in names]

    def column(self, meta: Meta, children: list[Token]) -> ast.Column:
        name, type_name = children
        return ast.Column(str(name), str(type_name), _span(meta))

    def type_union(self, meta: Meta, children: list[Token]) -> ast.TypeDecl:
        name, *bases = children
        return ast.TypeDecl(str(name), tuple(str(b) for b in bases), _span(meta))

    def directive(self, meta: Meta, children: list[Any]) -> list[ast.Directive]:
        kind_token, names, options = children
        kind = cast(_DirectiveKind, str(kind_token)[1:])
        span = _span(meta)
        return [ast.Directive(kind, name, options or (), span) for name in names]

    def option(self, meta: Meta, children: list[Any]) -> tuple[str, str]:
        key, value = children
        return (str(key), value)

    def _tuple(self, meta: Meta, children: list[Any]) -> tuple[Any, ...]:
        return tuple(children)

    def _text(self, meta: Meta, children: list[Token]) -> str:
        return str(children[0])

    def string_option(self, meta: Meta, children: list[Token]) -> str:
        return _unescape(str(children[0]))

    def number_token(self, meta: Meta, children: list[Token]) -> str:
        return "".join(children)

    def names(self, meta: Meta, children: list[Token]) -> list[str]:
        return [str(name) for name in children]

    # clauses and bodies

    def fact(self, meta: Meta, children: list[Any]) -> list[ast.Rule]:
        span = _span(meta)
        return [ast.Rule(head, (), span) for head in children[0]]

    def rule(self, meta: Meta, children: list[Any]) -> list[ast.Rule]:
        heads, body = children
        span = _span(meta)
        return [ast.Rule(head, body.as_body(), span) for head in heads]

    def query(self, meta: Meta, children: list[Any]) -> ast.Query:
        return ast.Query(children[0].as_body(), self.source, _span(meta))

    def disjunction(self, meta: Meta, children: list[Any]) -> _Alternatives:
        return _Alternatives(tuple(children), _span(meta))

    def group(self, meta: Meta, children: list[_Alternatives]) -> ast.Disjunction:
        return ast.Disjunction(children[0].conjunctions, _span(meta))

    def atom(self, meta: Meta, children: list[Any]) -> ast.Atom:
        name, terms = children
        return ast.Atom(str(name), terms or (), _span(meta))

    def negation(self, meta: Meta, children: list[ast.Atom]) -> ast.Negation:
        return ast.Negation(children[0], _span(meta))

    def comparison(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        left, op, right = children
        return ast.Comparison(cast(ast.ComparisonOp, str(op)), left, right, _span(meta))

    def builtin(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        op, left, right = children
        return ast.Comparison(cast(ast.ComparisonOp, str(op)), left, right, _span(meta))

    def negated_builtin(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        op, left, right = children
        return ast.Comparison(cast(ast.ComparisonOp, f"!{op}"), left, right, _span(meta))

    # terms

    def binop(self, meta: Meta, children: list[Any]) -> ast.BinOp:
        left, op, right = children
        return ast.BinOp(cast(ast.ArithmeticOp, str(op)), left, right, _span(meta))

    def neg(self, meta: Meta, children: list[Any]) -> ast.Neg:
        return ast.Neg(children[1], _span(meta))

    def negative_number(self, meta: Meta, children: list[Token]) -> ast.Const:
        literal = children[1]
        if literal.type == "FLOAT":
            return ast.Const(-float(literal), "float", _span(meta))
        return ast.Const(-_integer(literal), "number", _span(meta))

    def var(self, meta: Meta, children: list[Token]) -> ast.Var:
        return ast.Var(str(children[0]), _span(meta))

    def wildcard(self, meta: Meta, children: list[Token]) -> ast.Wildcard:
        return ast.Wildcard(_span(meta))

    def number(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_integer(children[0]), "number", _span(meta))

    def ipv4(self, meta: Meta, children: list[Token]) -> ast.Const:
        a, b, c, d = (int(part) for part in str(children[0]).split("."))
        return ast.Const((a << 24) | (b << 16) | (c << 8) | d, "number", _span(meta))

    def unsigned(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_integer(children[0][:-1]), "unsigned", _span(meta))

    def float(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(float(children[0]), "float", _span(meta))

    def string(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_unescape(children[0]), "symbol", _span(meta))

    def call(self, meta: Meta, children: list[Any]) -> ast.Call:
        name, args = children
        return ast.Call(str(name), args or (), _span(meta))

    def count_aggregate(self, meta: Meta, children: list[Any]) -> ast.Aggregate:
        return ast.Aggregate("count", None, _body(children[1]), _span(meta))

    def aggregate(self, meta: Meta, children: list[Any]) -> ast.Aggregate:
        function, target, body = children
        name = cast(ast.AggregateFunction, str(function))
        return ast.Aggregate(name, target, _body(body), _span(meta))

    # Rules whose nodes share a shape share a method.
    columns = options = heads = conjunction = terms = _tuple
    qualifier = word_option = _text
    subtype = type_union
    head = atom


def _body(node: _Alternatives | ast.Atom) -> tuple[ast.Literal, ...]:
    """An aggregate's body: `{ ... }` or a single atom."""
    return node.as_body() if isinstance(node, _Alternatives) else (node,)


# --- syntax errors ---------------------------------------------------------------------
#
# A lark error becomes one DatalogSyntaxError, trying in order: problems visible
# in the raw text (strings, comments, unknown directives, brackets), the catalogue
# of malformed snippets below (matched by parser state, as lark's `match_examples`
# does), rules on what the parser would have accepted, and finally a plain
# "unexpected X; expected Y" in words rather than terminal names.

_DIRECTIVES = (".decl", ".type", ".input", ".output", ".printsize", ".pragma")
_UNSUPPORTED = frozenset(
    (".functor", ".comp", ".init", ".plan", ".include", ".limitsize", ".number_type")
)
_STATEMENT_START = frozenset({"NAME", "QNAME", "_DECL", "_TYPE", "_PRAGMA", "DIRECTIVE", "$END"})
_CLOSING = frozenset({"_DOT", "_IF", "_DECL", "_TYPE", "_PRAGMA", "DIRECTIVE", "$END"})
_TERM_START = frozenset({"NAME", "QNAME", "INT", "IPV4", "UNSIGNED", "FLOAT", "STRING", "WILDCARD"})
_PIECES = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*.*?(?:\*/|$)|\s+|.', re.DOTALL)

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


def _explain(error: UnexpectedInput, text: str, start: str) -> DatalogSyntaxError:
    position = error.pos_in_stream if isinstance(error, UnexpectedCharacters) else None
    if isinstance(error, UnexpectedToken) and error.token.type in ("_DOT", "SLASH"):
        position = error.token.start_pos
    where = position if position is not None else getattr(error, "pos_in_stream", None)
    found = _feature_problem(text, where) if where is not None else None
    if found is None and position is not None:
        found = _text_problem(text, position, error)
    if found is None and isinstance(error, UnexpectedToken):
        found = _token_problem(error, text, start)
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
            return message, _span_at(text, at, len(feature))
    return None


def _text_problem(text: str, pos: int, error: UnexpectedInput) -> tuple[str, ast.Span] | None:
    """Problems seen in the raw text at `pos`: comments, strings, directives."""
    if text.startswith("/*", pos):
        return "unterminated comment: `/*` has no closing `*/`", _span_at(text, pos, 2)
    if text.startswith('"', pos):
        return _bad_string(text, pos)
    word = re.match(r"\.[A-Za-z_]\w*", text[pos:])
    expected = set(getattr(error, "expected", None) or getattr(error, "allowed", None) or ())
    if word and "_DECL" in expected:
        name = word.group()
        span = _span_at(text, pos, len(name))
        if name in _UNSUPPORTED:
            return f"the Soufflé directive `{name}` is not supported", span
        return f"unknown directive `{name}`{did_you_mean(name, _DIRECTIVES)}", span
    return None


def _bad_string(text: str, pos: int) -> tuple[str, ast.Span]:
    escape = re.compile(r'"(?:[^"\\\n]|\\["\\ntr])*(\\.?)').match(text, pos)
    if escape and escape.group(1):
        where = escape.start(1)
        bad = escape.group(1)
        message = f'unknown escape `{bad}` in a string; use `\\"`, `\\\\`, `\\n`, `\\t` or `\\r`'
        return message, _span_at(text, where, len(bad))
    message = 'unterminated string: a string must end with `"` on the same line'
    return message, _span_at(text, pos, 1)


def _bad_character(text: str, error: UnexpectedInput) -> tuple[str, ast.Span]:
    pos = error.pos_in_stream or 0
    char = text[pos] if pos < len(text) else ""
    return f"unexpected character `{char}`", _span_at(text, pos, 1)


def _token_problem(error: UnexpectedToken, text: str, start: str) -> tuple[str, ast.Span]:
    token = error.token
    pos = len(text) if token.type == "$END" else token.start_pos or 0
    accepts = error.accepts or error.expected
    unbalanced = _bracket_problem(text, pos, token.type, accepts)
    if unbalanced is not None:
        return unbalanced
    message = _match_examples(error, start) or _accepts_rule(text, pos, token, accepts)
    if message == AFTER_HEAD and token.type == "$END":
        message = "missing `.` at the end of a fact"
    if message is not None:
        return message, _missing_span(text, pos, token)
    wanted = _join(_expected_phrases(accepts))
    message = f"unexpected {_describe(token)}; expected {wanted}"
    return message, _missing_span(text, pos, token) if token.type == "$END" else _span(token)


def _bracket_problem(
    text: str, pos: int, token_type: str, accepts: set[str]
) -> tuple[str, ast.Span] | None:
    parens, braces = _depths(text, pos)
    if token_type == "_RPAR" and parens <= 0:
        return "unbalanced parenthesis: this `)` has no matching `(`", _span_at(text, pos, 1)
    if token_type == "_RBRACE" and braces <= 0:
        return "unbalanced braces: this `}` has no matching `{`", _span_at(text, pos, 1)
    later = token_type in ("NAME", "QNAME") and _on_later_line(text, pos)
    closing = token_type in _CLOSING or text.startswith(":-", pos) or later
    if closing and parens > 0 and "_RPAR" in accepts:
        return "unbalanced parenthesis: missing `)`", _after_previous(text, pos)
    if closing and braces > 0 and "_RBRACE" in accepts:
        return "unbalanced braces: missing `}`", _after_previous(text, pos)
    return None


def _accepts_rule(text: str, pos: int, token: Token, accepts: set[str]) -> str | None:
    """Messages that follow from what the parser would have taken instead."""
    if "_IF" in accepts:
        return AFTER_HEAD
    if "_DOT" in accepts and (token.type in _STATEMENT_START or _on_later_line(text, pos)):
        return MISSING_DOT
    if "_COMMA" in accepts and token.type in _TERM_START and _depths(text, pos)[0] > 0:
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
    for known, message in _known_failures(start):
        if known[:3] == failure[:3]:
            if known[3] == failure[3]:
                return message
            fallback = fallback or message
    return fallback


@functools.cache
def _known_failures(start: str) -> tuple[tuple[_Failure, str], ...]:
    found = []
    for message, snippets in _catalogue(start):
        for snippet in snippets:
            try:
                _lark().parse(snippet, start=start)
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
        "DIRECTIVE": "`.input`, `.output` or `.printsize`",
        "$END": "end of input",
    }
)
_TERM_TERMINALS = frozenset(_TERM_START | {"COUNT", "AGGREGATE_FUNCTION", "MINUS", "_LPAR"})


def _expected_phrases(accepts: set[str]) -> list[str]:
    names = set(accepts)
    phrases: list[str] = []
    if "_DECL" in names:
        names -= {"_DECL", "_TYPE", "DIRECTIVE", "NAME", "QNAME", "$END"}
        phrases += ["a declaration", "a directive", "a rule"]
    elif {"NAME", "INT", "STRING"} <= names:
        literal = "_BANG" in names
        names -= _TERM_TERMINALS | ({"_BANG", "BUILTIN"} if literal else set())
        phrases.append("a literal" if literal else "a term")
    words = [_PHRASES.get(n) or f"`{_lark().get_terminal(n).pattern.value}`" for n in names]
    for phrase in sorted(words, key=lambda w: (not w.startswith("`"), w)):
        if phrase not in phrases:
            phrases.append(phrase)
    return phrases


def _join(phrases: list[str]) -> str:
    if len(phrases) <= 1:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _describe(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    kind = _TOKEN_KINDS.get(token.type)
    return f"{kind} `{token}`" if kind else f"`{token}`"


def _significant(text: str, end: int) -> list[re.Match[str]]:
    """The pieces of `text[:end]` that are neither blanks nor comments."""
    pieces = _PIECES.finditer(text, 0, end)
    return [m for m in pieces if not m.group().isspace() and not m.group().startswith(("//", "/*"))]


def _depths(text: str, end: int) -> tuple[int, int]:
    pieces = [m.group() for m in _significant(text, end)]
    return pieces.count("(") - pieces.count(")"), pieces.count("{") - pieces.count("}")


def _on_later_line(text: str, pos: int) -> bool:
    pieces = _significant(text, pos)
    return "\n" in text[pieces[-1].end() if pieces else 0 : pos]


def _after_previous(text: str, pos: int) -> ast.Span:
    """A one-character span just after the last token before `pos`."""
    pieces = _significant(text, pos)
    return _span_at(text, pieces[-1].end() if pieces else 0, 1)


def _missing_span(text: str, pos: int, token: Token) -> ast.Span:
    if token.type == "$END" or _on_later_line(text, pos):
        return _after_previous(text, pos)
    return _span(token)


def _span_at(text: str, offset: int, width: int) -> ast.Span:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return ast.Span(line, column, line, column + width, offset, offset + width)
