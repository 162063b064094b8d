"""The language front end: Datalog text to the AST of `datalog.lang.ast`.

Layer: datalog (language). Imports `lark` and `datalog.lang.syntax_errors` when it
first parses (so that `import datalog` does not), `datalog.lang.ast`,
`datalog.lang.errors`, `datalog.lang.grammar` and `datalog.lang.source_text`; nothing
from the engine. The parser of `datalog.lang.grammar` has two start symbols (`program`,
`query`). The builder below only builds AST nodes; checks run later as passes.
Every syntax problem is raised as a `DatalogSyntaxError` with a plain-words message
(`datalog.lang.syntax_errors`); lark's exceptions never escape.

Hostile text is refused before lark reads it (`datalog.lang.source_text`): a lone
surrogate, brackets nested deeper than `MAX_NESTING`. The parse tree is built into
the AST without recursion, and a tree nested deeper than `MAX_NESTING` levels (a
sum of 5,000 terms nests no bracket but is 5,000 operators deep) is refused at the
node that goes past it: every pass after this one walks terms recursively, within
the interpreter's default recursion limit (`datalog.lang.nesting`). Every span carries
its text, so an error found long after parsing (a functor raising at a commit)
still shows its line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

from datalog.lang import ast
from datalog.lang.errors import DatalogSyntaxError
from datalog.lang.grammar import lark_parser, span_of
from datalog.lang.nesting import LEVELS, MAX_NESTING
from datalog.lang.source_text import SourceText, first_surrogate, span_at
from datalog.lang.standalone import Standalone, standalone_parser
from differential.dataflow import check_budget

if TYPE_CHECKING:  # lark is imported by the first parse, not by `import datalog`
    from lark import Token, Tree
    from lark.tree import Meta

__all__ = ["parse_program", "parse_query"]

_DirectiveKind = Literal["input", "output", "printsize"]
# Soufflé's conversion functors, read as the casts they are (`as`, ADR 0027).
_CONVERSIONS: dict[str, ast.ColumnType] = {
    "itof": "float", "utof": "float", "itou": "unsigned",
    "ftou": "unsigned", "ftoi": "number", "utoi": "number",
}  # fmt: skip
# Soufflé's typed ranges: `range` over their arguments cast to the type.
_RANGES: dict[str, ast.ColumnType] = {"urange": "unsigned", "frange": "float"}
_PRIMITIVES: dict[str, ast.ColumnType] = {
    "number": "number",
    "unsigned": "unsigned",
    "float": "float",
    "symbol": "symbol",
}
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
    _refuse_hostile(SourceText(text))
    build = _built_text if len(text) <= _REMEMBERED_TEXT else _built_text.__wrapped__
    return build(text, start, standalone_parser())


# Texts up to this many characters are remembered (`_built_text`); a longer one (a
# program holding its facts) is parsed each time rather than kept alive with its tree.
_REMEMBERED_TEXT = 1 << 16


@lru_cache(maxsize=256)
def _built_text(text: str, start: str, fast: Standalone | None) -> ast.Program | ast.Query:
    """The syntax tree of `text` from `start`, parsed by `fast` (None: lark), remembered
    for the short texts parsed most recently: the tree is immutable, so a query read
    after each commit or a program defined again is parsed once. A text that fails
    raises each time it is asked."""
    tree = _parse(SourceText(text), start, fast)
    return cast(ast.Program | ast.Query, _build(tree, _Builder(text)))


def _refuse_hostile(source: SourceText) -> None:
    """A lone surrogate, or brackets nested too deeply, found without parsing."""
    text = source.text
    surrogate = first_surrogate(text)
    if surrogate is not None:
        code = f"U+{ord(text[surrogate]):04X}"
        message = f"the text holds a lone surrogate ({code}), which is not a character"
        raise DatalogSyntaxError(message, span_at(text, surrogate), text)
    deep = source.too_deep()
    if deep is not None:
        raise _too_deep(span_at(text, deep), text, brackets=True)


def _too_deep(span: ast.Span, text: str, brackets: bool = False) -> DatalogSyntaxError:
    what = (
        "brackets"
        if brackets
        else "levels (an operator counts 1, a call 2, a group of literals 4, an aggregate 5)"
    )
    message = (
        f"nested too deeply: more than {MAX_NESTING} {what} here; "
        "split it with intermediate variables or relations"
    )
    return DatalogSyntaxError(message, span, text)


def _parse(source: SourceText, start: str, fast: Standalone | None) -> Any:
    """The parse tree of `source` from `start`: by the stand-alone parser `fast` when
    there is one (it loads no lark, ADR 0084); a text it refuses is parsed again by
    lark, whose error is explained."""
    if fast is not None:
        try:
            return fast.parser.parse(source.text, start=start)
        except fast.error:
            pass
    from lark.exceptions import UnexpectedInput

    try:
        return lark_parser().parse(source.text, start=start)
    except UnexpectedInput as error:
        from datalog.lang.syntax_errors import explain

        raise explain(error, source, start) from None


def _build(tree: Tree[Token], builder: _Builder) -> Any:
    """The builder's value of `tree`, children first, without recursion; a node
    deeper than `MAX_NESTING` is refused before anything is built."""
    tree_class = type(tree)  # lark's, or the stand-alone parser's
    order: list[Tree[Token] | Token | None] = []
    pending: list[tuple[Tree[Token] | Token | None, int]] = [(tree, 0)]
    while pending:
        node, levels = pending.pop()
        order.append(node)
        if isinstance(node, tree_class):
            levels += LEVELS.get(node.data, 0)
            if levels > MAX_NESTING:
                text = builder.source
                raise _too_deep(span_at(text, node.meta.start_pos), text)
            pending.extend((child, levels) for child in node.children)
    values: list[Any] = []
    for count, node in enumerate(reversed(order)):
        if not isinstance(node, tree_class):
            values.append(node)
            continue
        if not count % 4096:
            check_budget()
        size = len(node.children)
        children = values[len(values) - size :] if size else []
        del values[len(values) - size :]
        values.append(getattr(builder, node.data)(node.meta, children))
    return values[0]


# --- spans and literal values ------------------------------------------------------


def _unescape(quoted: str) -> str:
    """The value of a string literal `"..."` (escapes `\\" \\\\ \\n \\t \\r`)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], quoted[1:-1])


def _integer(text: str) -> int:  # its range depends on the type: `infer_types` checks it
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


class _Builder:
    """Builds AST nodes from the parse tree, bottom-up: one method per tree node
    name, given its meta and its children's values. No checks here."""

    def __init__(self, source: str) -> None:
        self.source = source

    def span(self, where: Meta | Token) -> ast.Span:
        """The span of a node or token, naming this text."""
        return span_of(where, self.source)

    # programs and declarations

    def program(self, meta: Meta, items: list[Any]) -> ast.Program:
        return _program(items, self.source)

    def component(self, meta: Meta, children: list[Any]) -> ast.Component:
        signature, bases, *items = children
        body = _program(items, self.source)
        span = self.span(meta)
        return ast.Component(signature.name, signature.args, bases or (), body, span)

    def component_type(self, meta: Meta, children: list[Any]) -> ast.ComponentType:
        name, arguments = children
        return ast.ComponentType(str(name), arguments or (), self.span(meta))

    def type_arguments(self, meta: Meta, children: list[Token]) -> tuple[str, ...]:
        return tuple(str(name) for name in children)

    def instance(self, meta: Meta, children: list[Any]) -> ast.Instance:
        name, component = children
        return ast.Instance(str(name), component, self.span(meta))

    def override(self, meta: Meta, children: list[Token]) -> ast.Override:
        return ast.Override(str(children[0]), self.span(meta))

    def pragma(self, meta: Meta, children: list[Any]) -> ast.Pragma:
        key, value = children
        text = "" if value is None else _unescape(value)
        return ast.Pragma(_unescape(key), text, self.span(meta))

    def decl(self, meta: Meta, children: list[Any]) -> list[ast.Decl]:
        names, columns, *qualifiers = children
        semantics: ast.Semantics = "set"
        for qualifier in qualifiers:
            if qualifier in ("set", "multiset", "last_write_wins"):
                semantics = qualifier
        span = self.span(meta)
        written = tuple(str(q) for q in qualifiers)
        return [ast.Decl(name, columns or (), semantics, span, written) for name in names]

    def column(self, meta: Meta, children: list[Token]) -> ast.Column:
        name, type_name = children
        return ast.Column(str(name), str(type_name), self.span(meta))

    def functor_decl(self, meta: Meta, children: list[Any]) -> ast.FunctorDecl:
        name, params, result, stateful = children
        span = self.span(meta)
        return ast.FunctorDecl(str(name), params or (), str(result), stateful is not None, span)

    def unnamed_param(self, meta: Meta, children: list[Token]) -> ast.Column:
        return ast.Column("", str(children[0]), self.span(meta))

    def type_union(self, meta: Meta, children: list[Token]) -> ast.TypeDecl:
        name, *bases = children
        return ast.TypeDecl(str(name), tuple(str(b) for b in bases), self.span(meta))

    def directive(self, meta: Meta, children: list[Any]) -> list[ast.Directive]:
        kind_token, names, options = children
        kind = cast(_DirectiveKind, str(kind_token)[1:])
        span = self.span(meta)
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
        span = self.span(meta)
        return [ast.Rule(head, (), span) for head in children[0]]

    def rule(self, meta: Meta, children: list[Any]) -> list[ast.Rule]:
        heads, body = children
        span = self.span(meta)
        return [ast.Rule(head, body.as_body(), span) for head in heads]

    def subsumption(self, meta: Meta, children: list[Any]) -> list[ast.Subsumption]:
        dominated, dominating, body = children
        return [ast.Subsumption(dominated, dominating, body.as_body(), self.span(meta))]

    def query(self, meta: Meta, children: list[Any]) -> ast.Query:
        return ast.Query(children[0].as_body(), self.source, self.span(meta))

    def disjunction(self, meta: Meta, children: list[Any]) -> _Alternatives:
        return _Alternatives(tuple(children), self.span(meta))

    def group(self, meta: Meta, children: list[_Alternatives]) -> ast.Disjunction:
        return ast.Disjunction(children[0].conjunctions, self.span(meta))

    def atom(self, meta: Meta, children: list[Any]) -> ast.Atom:
        name, terms = children
        return ast.Atom(str(name), terms or (), self.span(meta))

    def negation(self, meta: Meta, children: list[ast.Atom]) -> ast.Negation:
        return ast.Negation(children[0], self.span(meta))

    def comparison(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        left, op, right = children
        return ast.Comparison(cast(ast.ComparisonOp, str(op)), left, right, self.span(meta))

    def builtin(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        op, left, right = children
        return ast.Comparison(cast(ast.ComparisonOp, str(op)), left, right, self.span(meta))

    def negated_builtin(self, meta: Meta, children: list[Any]) -> ast.Comparison:
        op, left, right = children
        return ast.Comparison(cast(ast.ComparisonOp, f"!{op}"), left, right, self.span(meta))

    # terms

    def binop(self, meta: Meta, children: list[Any]) -> ast.BinOp:
        left, op, right = children
        return ast.BinOp(cast(ast.ArithmeticOp, str(op)), left, right, self.span(meta))

    def neg(self, meta: Meta, children: list[Any]) -> ast.Neg:
        return ast.Neg(children[1], self.span(meta))

    def negative_number(self, meta: Meta, children: list[Token]) -> ast.Const:
        literal = children[1]
        if literal.type == "FLOAT":
            return ast.Const(-float(literal), "float", self.span(meta))
        return ast.Const(-_integer(literal), "number", self.span(meta))

    def var(self, meta: Meta, children: list[Token]) -> ast.Var:
        return ast.Var(str(children[0]), self.span(meta))

    def wildcard(self, meta: Meta, children: list[Token]) -> ast.Wildcard:
        return ast.Wildcard(self.span(meta))

    def number(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_integer(children[0]), "number", self.span(meta))

    def ipv4(self, meta: Meta, children: list[Token]) -> ast.Const:
        """`a.b.c.d` is the number Soufflé's scanner makes of it: the address as a
        signed 32-bit integer (`255.255.255.255` is -1, `192.168.0.1` is -1062731775)."""
        a, b, c, d = (int(part) for part in str(children[0]).split("."))
        value = (a << 24) | (b << 16) | (c << 8) | d
        signed = value - (1 << 32) if value >= 1 << 31 else value
        return ast.Const(signed, "number", self.span(meta))

    def unsigned(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_integer(children[0][:-1]), "unsigned", self.span(meta))

    def float(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(float(children[0]), "float", self.span(meta))

    def string(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(_unescape(children[0]), "symbol", self.span(meta))

    def call(self, meta: Meta, children: list[Any]) -> ast.Call | ast.Cast:
        name, args = children
        span, target = self.span(meta), _CONVERSIONS.get(str(name))
        if target is not None and args is not None and len(args) == 1:  # itof(x): as(x, float)
            return ast.Cast(args[0], target, span, target)
        kind = _RANGES.get(str(name))
        if kind is not None and args is not None:  # urange(a, b): range over unsigned values
            return ast.Call("range", tuple(ast.Cast(a, kind, span, kind) for a in args), span)
        return ast.Call(str(name), args or (), span)

    def cast(self, meta: Meta, children: list[Any]) -> ast.Cast:
        _, value, type_name = children
        return ast.Cast(value, str(type_name), self.span(meta), _PRIMITIVES.get(str(type_name)))

    def count_aggregate(self, meta: Meta, children: list[Any]) -> ast.Aggregate:
        return ast.Aggregate("count", None, _body(children[1]), self.span(meta))

    def aggregate(self, meta: Meta, children: list[Any]) -> ast.Aggregate:
        function, target, body = children
        name = cast(ast.AggregateFunction, str(function))
        return ast.Aggregate(name, target, _body(body), self.span(meta))

    # Rules whose nodes share a shape share a method.
    columns = functor_params = options = heads = conjunction = terms = component_types = _tuple
    qualifier = word_option = _text
    subtype = type_union
    head = atom


def _program(items: list[Any], source: str) -> ast.Program:
    """The statements of a program or of a component's body, by kind."""
    flat = [node for item in items for node in (item if isinstance(item, list) else [item])]

    def of(kind: type[Any]) -> tuple[Any, ...]:
        return tuple(n for n in flat if isinstance(n, kind))

    return ast.Program(
        decls=of(ast.Decl),
        types=of(ast.TypeDecl),
        directives=of(ast.Directive),
        rules=of(ast.Rule),
        source=source,
        pragmas=of(ast.Pragma),
        functors=of(ast.FunctorDecl),
        subsumptions=of(ast.Subsumption),
        components=of(ast.Component),
        instances=of(ast.Instance),
        overrides=of(ast.Override),
    )


def _body(node: _Alternatives | ast.Atom) -> tuple[ast.Literal, ...]:
    """An aggregate's body: `{ ... }` or a single atom."""
    return node.as_body() if isinstance(node, _Alternatives) else (node,)
