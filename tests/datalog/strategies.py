"""Hypothesis strategies for random Datalog ASTs: terms, literals, rules, programs.

Every AST drawn here is one the parser can produce, so
`parse(format(node)) == node` must hold for it. Names avoid the words the
grammar reserves where they could be read as keywords. The ASTs are syntactic
only: they need not pass the checker (arity, types, range restriction).
"""

from __future__ import annotations

from hypothesis import strategies as st

from datalog.lang import ast

RESERVED = frozenset(
    {
        "count", "sum", "min", "max", "mean", "contains", "match", "as",
        "band", "bor", "bxor", "bshl", "bshr",
        "set", "multiset", "last_write_wins", "btree", "btree_delete", "brie", "eqrel",
        "inline", "no_inline", "magic", "no_magic", "override",
    }
)  # fmt: skip

FUNCTIONS = ("cat", "strlen", "substr", "to_number", "to_string", "ord", "f")
COLUMN_TYPES = ("number", "unsigned", "float", "symbol")
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=", "contains", "match")
ARITHMETIC = ("+", "-", "*", "/", "%", "^", "band", "bor", "bxor", "bshl", "bshr")

names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(lambda n: n not in RESERVED)
variable_names = st.one_of(names, st.from_regex(r"[A-Z_][A-Za-z0-9_]{1,4}", fullmatch=True))
relation_names = st.one_of(names, st.lists(names, min_size=2, max_size=3).map(".".join))

# --- terms ------------------------------------------------------------------------

variables = st.builds(ast.Var, variable_names)
wildcards = st.builds(ast.Wildcard)
numbers = st.builds(ast.Const, st.integers(-(2**63), 2**63 - 1), st.just("number"))
unsigneds = st.builds(ast.Const, st.integers(0, 2**64 - 1), st.just("unsigned"))
floats = st.builds(ast.Const, st.floats(allow_nan=False, allow_infinity=False), st.just("float"))
symbols = st.builds(
    ast.Const, st.text(st.characters(exclude_categories=("Cs",)), max_size=8), st.just("symbol")
)
constants = st.one_of(numbers, unsigneds, floats, symbols)
leaf_terms = st.one_of(variables, wildcards, constants)


# Terms hold aggregates, which hold bodies, which hold terms: `depth` bounds how
# deeply aggregates and disjunctions nest and `size` how deep operators nest, so
# every draw is finite. Composite strategies keep hypothesis's reprs short.


@st.composite
def term_strategy(draw: st.DrawFn, depth: int = 1, size: int = 2) -> ast.Term:
    """A term: leaves first (they shrink best), then operators, calls, aggregates."""
    kinds = ["leaf"] if size == 0 else ["leaf", "binop", "neg", "call", "minmax", "cast"]
    if depth > 0:
        kinds.append("aggregate")
    kind = draw(st.sampled_from(kinds))
    inner = term_strategy(depth, size - 1)
    if kind == "binop":
        return ast.BinOp(draw(st.sampled_from(ARITHMETIC)), draw(inner), draw(inner))
    if kind == "neg":
        return ast.Neg(draw(inner))
    if kind == "call":
        return ast.Call(draw(st.sampled_from(FUNCTIONS)), tuple(draw(st.lists(inner, max_size=3))))
    if kind == "minmax":
        args = draw(st.lists(inner, min_size=2, max_size=3))
        return ast.Call(draw(st.sampled_from(("min", "max"))), tuple(args))
    if kind == "cast":
        return ast.Cast(draw(inner), draw(st.one_of(st.sampled_from(COLUMN_TYPES), relation_names)))
    if kind == "aggregate":
        return draw(aggregate_strategy(depth))
    return draw(leaf_terms)


@st.composite
def aggregate_strategy(draw: st.DrawFn, depth: int = 1) -> ast.Aggregate:
    body = draw(body_strategy(depth - 1))
    function = draw(st.sampled_from(("count", "sum", "min", "max", "mean")))
    target = None if function == "count" else draw(term_strategy(depth - 1, 1))
    return ast.Aggregate(function, target, body)


@st.composite
def atom_strategy(draw: st.DrawFn, depth: int = 1) -> ast.Atom:
    args = draw(st.lists(term_strategy(depth), max_size=3))
    return ast.Atom(draw(relation_names), tuple(args))


@st.composite
def literal_strategy(draw: st.DrawFn, depth: int = 1) -> ast.Literal:
    """An atom, a negation, a comparison or (if `depth` > 0) a disjunction."""
    kinds = ["atom", "negation", "comparison"] + (["disjunction"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "negation":
        return ast.Negation(draw(atom_strategy(depth)))
    if kind == "comparison":
        terms = term_strategy(depth)
        return ast.Comparison(draw(st.sampled_from(COMPARISONS)), draw(terms), draw(terms))
    if kind == "disjunction":
        alternatives = draw(st.lists(body_strategy(depth - 1), min_size=1, max_size=2))
        return ast.Disjunction(tuple(alternatives))
    return draw(atom_strategy(depth))


def body_strategy(depth: int = 1) -> st.SearchStrategy[tuple[ast.Literal, ...]]:
    return st.lists(literal_strategy(depth), min_size=1, max_size=2 + (depth > 1)).map(tuple)


terms = term_strategy()
aggregates = aggregate_strategy()
atoms = atom_strategy()
literals = literal_strategy()
bodies = body_strategy()

# --- clauses and programs ---------------------------------------------------------------

rules = st.builds(ast.Rule, atom_strategy(1), st.one_of(st.just(()), body_strategy(1)))
columns = st.builds(ast.Column, names, st.one_of(st.sampled_from(COLUMN_TYPES), relation_names))
decls = st.builds(
    ast.Decl,
    relation_names,
    st.lists(columns, max_size=4).map(tuple),
    st.sampled_from(("set", "multiset", "last_write_wins")),
)
type_bases = st.lists(relation_names, min_size=1, max_size=3).map(tuple)
type_decls = st.builds(ast.TypeDecl, names, type_bases)
option_values = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
options = st.lists(st.tuples(names, option_values), max_size=3).map(tuple)
directives = st.builds(
    ast.Directive, st.sampled_from(("input", "output", "printsize")), relation_names, options
)
programs = st.builds(
    ast.Program,
    st.lists(decls, max_size=3).map(tuple),
    st.lists(type_decls, max_size=2).map(tuple),
    st.lists(directives, max_size=2).map(tuple),
    st.lists(rules, max_size=3).map(tuple),
)
queries = st.builds(ast.Query, bodies)
