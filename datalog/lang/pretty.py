"""The pretty-printer: AST back to Datalog text.

Layer: datalog (language). Imports only `datalog.lang.ast`. The contract, checked by a
property test: `parse_program(format_program(p)) == p` for every program `p` the
parser can produce (spans and source text are not compared), and likewise for
rules, literals, terms and queries. Parentheses are printed only where the
grammar's precedence needs them.
"""

from __future__ import annotations

from datalog.lang import ast

__all__ = [
    "format_program",
    "format_component",
    "format_instance",
    "format_decl",
    "format_type",
    "format_functor",
    "format_directive",
    "format_rule",
    "format_subsumption",
    "format_body",
    "format_literal",
    "format_term",
    "format_query",
]

# Binding strength, loosest first, as in grammar.lark: bitwise < additive <
# multiplicative < unary minus < power < primary.
_BITWISE, _ADDITIVE, _MULTIPLICATIVE, _UNARY, _POWER, _PRIMARY = range(1, 7)

_PRECEDENCE: dict[str, int] = {
    **dict.fromkeys(("band", "bor", "bxor", "bshl", "bshr"), _BITWISE),
    **dict.fromkeys(("+", "-"), _ADDITIVE),
    **dict.fromkeys(("*", "/", "%"), _MULTIPLICATIVE),
    "^": _POWER,
}

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def format_program(program: ast.Program) -> str:
    """The whole program, one item per line: types, functors, decls, directives, rules,
    subsumptions, components and instances."""
    lines = [format_pragma(p) for p in program.pragmas]
    lines += [format_type(t) for t in program.types]
    lines += [format_functor(f) for f in program.functors]
    lines += [format_decl(d) for d in program.decls]
    lines += [format_directive(d) for d in program.directives]
    lines += [format_rule(r) for r in program.rules]
    lines += [format_subsumption(s) for s in program.subsumptions]
    lines += [format_component(c) for c in program.components]
    lines += [format_instance(i) for i in program.instances]
    lines += [f".override {o.relation}" for o in program.overrides]
    return "".join(line + "\n" for line in lines)


def format_component(component: ast.Component) -> str:
    """`.comp Name<T> : Base<T> {`, the body indented, `}`."""
    signature = _component_type(ast.ComponentType(component.name, component.params))
    bases = ", ".join(_component_type(b) for b in component.bases)
    body = format_program(component.body)
    inside = "".join(f"    {line}\n" for line in body.splitlines())
    return f".comp {signature}{f' : {bases}' if bases else ''} {{\n{inside}}}"


def format_instance(instance: ast.Instance) -> str:
    return f".init {instance.name} = {_component_type(instance.component)}"


def _component_type(used: ast.ComponentType) -> str:
    return f"{used.name}<{', '.join(used.args)}>" if used.args else used.name


def format_pragma(pragma: ast.Pragma) -> str:
    value = f" {_quote(pragma.value)}" if pragma.value else ""
    return f".pragma {_quote(pragma.key)}{value}"


def format_decl(decl: ast.Decl) -> str:
    columns = ", ".join(f"{c.name}: {c.type}" for c in decl.columns)
    qualifiers: list[str] = [] if decl.semantics == "set" else [decl.semantics]
    qualifiers += [
        q for q in ("eqrel", "overridable") if q in decl.qualifiers
    ]  # they mean something
    return f".decl {decl.name}({columns}){''.join(' ' + q for q in qualifiers)}"


def format_type(type_decl: ast.TypeDecl) -> str:
    if len(type_decl.bases) == 1:
        return f".type {type_decl.name} <: {type_decl.bases[0]}"
    return f".type {type_decl.name} = {' | '.join(type_decl.bases)}"


def format_functor(functor: ast.FunctorDecl) -> str:
    params = ", ".join(f"{p.name}: {p.type}" if p.name else p.type for p in functor.params)
    stateful = " stateful" if functor.stateful else ""
    return f".functor {functor.name}({params}): {functor.result}{stateful}"


def format_directive(directive: ast.Directive) -> str:
    text = f".{directive.kind} {directive.relation}"
    if directive.options:
        text += "(" + ", ".join(f"{k}={_quote(v)}" for k, v in directive.options) + ")"
    return text


def format_rule(rule: ast.Rule) -> str:
    """`head.` for a fact, `head :- body.` for a rule."""
    head = format_literal(rule.head)
    if rule.is_fact:
        return f"{head}."
    return f"{head} :- {format_body(rule.body)}."


def format_subsumption(clause: ast.Subsumption) -> str:
    """`r(x, d1) <= r(x, d2) :- d2 <= d1.`"""
    dominated, dominating = format_literal(clause.dominated), format_literal(clause.dominating)
    return f"{dominated} <= {dominating} :- {format_body(clause.body)}."


def format_body(body: tuple[ast.Literal, ...]) -> str:
    """A conjunction; a body that is one disjunction is printed without parentheses."""
    if len(body) == 1 and isinstance(body[0], ast.Disjunction) and len(body[0].alternatives) > 1:
        return _alternatives(body[0])
    return _conjunction(body)


def format_query(query: ast.Query) -> str:
    return format_body(query.body)


def format_literal(literal: ast.Literal) -> str:
    match literal:
        case ast.Atom(name, args):
            return f"{name}({_terms(args)})"
        case ast.Negation(atom):
            return "!" + format_literal(atom)
        case ast.Comparison(op, left, right) if op in ast.BUILTIN_PREDICATES:
            return f"{op}({format_term(left)}, {format_term(right)})"
        case ast.Comparison(op, left, right):
            return f"{format_term(left)} {op} {format_term(right)}"
        case ast.Disjunction():
            return f"({_alternatives(literal)})"
    raise TypeError(f"not a literal: {literal!r}")


def format_term(term: ast.Term, context: int = 0) -> str:
    """`term` as text, parenthesized if it binds more loosely than `context`."""
    return _wrapped(_term(term), context)


_Printed = tuple[str, int, ast.Term]  # a term's text, how strongly it binds, the term


def _wrapped(printed: _Printed, context: int) -> str:
    text, strength, _ = printed
    return f"({text})" if strength < context else text


def _term(term: ast.Term) -> _Printed:
    """The text of `term` and how strongly it binds. Iterative through operators,
    calls and casts (a 400-term sum is 400 levels deep), children first."""
    done: list[_Printed] = []
    pending: list[tuple[ast.Term, bool]] = [(term, False)]
    while pending:
        node, ready = pending.pop()
        children = _operands(node)
        if children and not ready:
            pending.append((node, True))
            pending.extend((child, False) for child in reversed(children))
            continue
        parts = done[len(done) - len(children) :] if children else []
        if children:
            del done[len(done) - len(children) :]
        text, strength = _printed(node, parts)
        done.append((text, strength, node))
    return done[0]


def _operands(term: ast.Term) -> tuple[ast.Term, ...]:
    if isinstance(term, ast.BinOp):
        return (term.left, term.right)
    if isinstance(term, ast.Neg):
        return (term.operand,)
    if isinstance(term, ast.Call):
        return term.args
    if isinstance(term, ast.Cast):
        return (term.value,)
    return ()


def _printed(term: ast.Term, parts: list[_Printed]) -> tuple[str, int]:
    """The text of `term` given its operands' (`parts`)."""
    match term:
        case ast.Var(name):
            return name, _PRIMARY
        case ast.Wildcard():
            return "_", _PRIMARY
        case ast.Const():
            return _const(term)
        case ast.BinOp(op):
            return _binop(op, parts[0], parts[1]), _PRECEDENCE[op]
        case ast.Neg():
            return "-" + _negated(parts[0]), _UNARY
        case ast.Call(function):
            return f"{function}({', '.join(_wrapped(p, 0) for p in parts)})", _PRIMARY
        case ast.Cast(_, type_name):
            return f"as({_wrapped(parts[0], 0)}, {type_name})", _PRIMARY
        case ast.Aggregate():
            return _aggregate(term), _PRIMARY
    raise TypeError(f"not a term: {term!r}")


def _binop(op: str, left: _Printed, right: _Printed) -> str:
    strength = _PRECEDENCE[op]
    if op == "^":  # right associative; the base must be a primary
        return f"{_wrapped(left, _PRIMARY)} ^ {_wrapped(right, _UNARY)}"
    return f"{_wrapped(left, strength)} {op} {_wrapped(right, strength + 1)}"


def _negated(operand: _Printed) -> str:
    # `-5` would read back as the constant -5, not as Neg(5).
    text, strength, term = operand
    if isinstance(term, ast.Const) and term.type in ("number", "float") and strength == _PRIMARY:
        return f"({text})"
    return _wrapped(operand, _UNARY)


def _const(const: ast.Const) -> tuple[str, int]:
    value = const.value
    if const.type == "symbol":
        return _quote(str(value)), _PRIMARY
    if const.type == "unsigned":
        return f"{value}u", _PRIMARY
    text = repr(float(value)) if const.type == "float" else str(value)
    return text, _UNARY if text.startswith("-") else _PRIMARY


def _aggregate(aggregate: ast.Aggregate) -> str:
    body = format_body(aggregate.body)
    if aggregate.target is None:
        return f"{aggregate.function} : {{ {body} }}"
    return f"{aggregate.function} {format_term(aggregate.target)} : {{ {body} }}"


def _alternatives(disjunction: ast.Disjunction) -> str:
    return " ; ".join(_conjunction(alt) for alt in disjunction.alternatives)


def _conjunction(literals: tuple[ast.Literal, ...]) -> str:
    return ", ".join(format_literal(literal) for literal in literals)


def _terms(terms: tuple[ast.Term, ...]) -> str:
    return ", ".join(format_term(t) for t in terms)


def _quote(text: str) -> str:
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'
