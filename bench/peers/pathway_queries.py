"""The suite's workloads as Pathway tables (the `pathway` peer's translations).

Layer: bench — may import anything public from deltalog packages and peers.
`ANSWERS[name](tables, params)` builds the workload's answer table from `tables`
(relation name -> Pathway table with columns `c0..ck`, set semantics); the same
builders serve Pathway's static mode (`pw.debug`) and its streaming mode, where one
input is fed row by row and the answer is maintained. Answers with `COUNTED` are
reduced to one row `n` (their size); the others are the answer rows themselves, in
the columns of `Workload.columns`. Pathway tables are keyed multisets, so unions and
projections that could repeat a row are made distinct with `groupby().reduce()`.
Recursion (reachability, closure, IS 2's walk to the root post) is `pw.iterate`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pathway as pw

from bench.workloads import PERSON_ATTRS, Params

__all__ = ["ANSWERS", "COUNTED"]

Tables = dict[str, Any]
Builder = Callable[[Tables, Params], Any]


def _distinct(table: Any, *columns: str) -> Any:
    return table.groupby(*(table[c] for c in columns)).reduce(*(pw.this[c] for c in columns))


def _reach(t: Tables, p: Params) -> Any:
    e = t["e"]
    seed = pw.debug.table_from_rows(pw.schema_from_types(y=int), [(p["source"],)])

    def step(reach: Any, e: Any) -> dict[str, Any]:
        new = reach.join(e, reach.y == e.c0).select(y=e.c1)
        return {"reach": _distinct(reach.concat_reindex(new), "y")}

    return pw.iterate(step, reach=pw.iterate_universe(seed), e=e)["reach"]


def _tc(t: Tables, _: Params) -> Any:
    e = t["e"]

    def step(tc: Any, e: Any) -> dict[str, Any]:
        new = tc.join(e, tc.y == e.c0).select(x=tc.x, y=e.c1)
        return {"tc": _distinct(tc.concat_reindex(new), "x", "y")}

    return pw.iterate(step, tc=pw.iterate_universe(e.select(x=e.c0, y=e.c1)), e=e)["tc"]


def _triangles(t: Tables, _: Params) -> Any:
    e = t["e"]
    bc, ac = e.copy(), e.copy()
    path = e.join(bc, e.c1 == bc.c0).select(a=e.c0, b=e.c1, c=bc.c1)
    return path.join(ac, path.a == ac.c0, path.c == ac.c1).select(path.a)


def _clique4(t: Tables, _: Params) -> Any:
    e = t["e"]
    bc, ac, ad, bd, cd = (e.copy() for _ in range(5))
    abc = e.join(bc, e.c1 == bc.c0).select(a=e.c0, b=e.c1, c=bc.c1)
    tri = abc.join(ac, abc.a == ac.c0, abc.c == ac.c1).select(abc.a, abc.b, abc.c)
    four = tri.join(ad, tri.a == ad.c0).select(tri.a, tri.b, tri.c, d=ad.c1)
    four = four.join(bd, four.b == bd.c0, four.d == bd.c1).select(four.a, four.c, four.d)
    return four.join(cd, four.c == cd.c0, four.d == cd.c1).select(four.a)


def _star(t: Tables, _: Params) -> Any:
    tables = [t[f"person.{a}"] for a in PERSON_ATTRS]
    joined = tables[0].select(p=tables[0].c0)
    for table in tables[1:]:
        joined = joined.join(table, joined.p == table.c0).select(p=joined.p)
    return joined


def _bi11(t: Tables, p: Params) -> Any:
    knows = t["person_knows_person"]
    window = knows.filter(
        (knows.c2 >= p["start"]) & (knows.c2 <= p["end"]) & (knows.c0 != knows.c1)
    )
    low = pw.if_else(window.c0 < window.c1, window.c0, window.c1)
    high = pw.if_else(window.c0 < window.c1, window.c1, window.c0)
    k = _distinct(window.select(a=low, b=high), "a", "b")
    name, kind = t["place.name"], t["place.type"]
    named, countries = name.filter(name.c1 == p["country"]), kind.filter(kind.c1 == "country")
    country = named.join(countries, named.c0 == countries.c0).select(c=named.c0)
    part, lives = t["place_isPartOf_place"], t["person_isLocatedIn_place"]
    cities = part.join(country, part.c1 == country.c).select(city=part.c0)
    local = _distinct(lives.join(cities, lives.c1 == cities.city).select(p=lives.c0), "p")
    bc, ac = k.copy(), k.copy()
    path = k.join(bc, k.b == bc.a).select(a=k.a, b=k.b, c=bc.b)
    tri = path.join(ac, path.a == ac.a, path.c == ac.b).select(path.a, path.b, path.c)
    for var in ("a", "b", "c"):
        mine = local.copy()
        tri = tri.join(mine, tri[var] == mine.p).select(tri.a, tri.b, tri.c)
    return tri


def _messages(t: Tables, kind: str) -> Any:
    """post and comment rows of `kind` (e.g. "creationDate" or "_hasTag_tag"), unioned."""
    sep = "" if kind.startswith("_") else "."
    post, comment = t[f"post{sep}{kind}"], t[f"comment{sep}{kind}"]
    return post.concat_reindex(comment)


def _top(table: Any, key: Any, group: list[str], k: int, columns: list[str]) -> Any:
    """The first `k` rows of each `group` by ascending `key` (a tuple expression), as
    rows of `columns`."""
    ranked = table.select(*(table[g] for g in group), row=pw.make_tuple(key, *table[columns]))
    by = ranked.groupby(*(ranked[g] for g in group)) if group else ranked.groupby()
    tops = by.reduce(*(pw.this[g] for g in group), rows=pw.reducers.sorted_tuple(ranked.row))
    tops = tops.select(*(tops[g] for g in group), rows=pw.apply(lambda r: r[:k], tops.rows))
    flat = tops.flatten(tops.rows)
    types = table.schema.typehints()
    return flat.select(
        *(flat[g] for g in group),
        **{c: pw.declare_type(types[c], flat.rows.get(i + 1)) for i, c in enumerate(columns)},
    )


def _bi2(t: Tables, p: Params) -> Any:
    cls, has_type, tag_name = t["tagclass.name"], t["tag_hasType_tagclass"], t["tag.name"]
    chosen = cls.filter(cls.c1 == p["tagclass"])
    typed = has_type.join(chosen, has_type.c1 == chosen.c0).select(t=has_type.c0)
    tags = typed.join(tag_name, typed.t == tag_name.c0).select(typed.t, name=tag_name.c1)
    mt, md = _messages(t, "_hasTag_tag"), _messages(t, "creationDate")
    dated = mt.join(md, mt.c0 == md.c0).select(t=mt.c1, d=md.c1)
    counts = tags
    for i, (lo, hi) in enumerate(((p["d1"], p["d2"]), (p["d2"], p["d3"])), start=1):
        inside = dated.filter((dated.d >= lo) & (dated.d < hi))
        per_tag = inside.groupby(inside.t).reduce(inside.t, n=pw.reducers.count())
        counts = counts.join_left(per_tag, counts.t == per_tag.t).select(
            *(counts[c] for c in counts.column_names()),
            **{f"c{i}": pw.coalesce(per_tag.n, 0)},
        )
    gap = pw.if_else(counts.c1 > counts.c2, counts.c1 - counts.c2, counts.c2 - counts.c1)
    rows = _distinct(
        counts.select(counts.name, counts.c1, counts.c2, gap=gap), "name", "c1", "c2", "gap"
    )
    top = _top(rows, pw.make_tuple(-rows.gap, rows.name), [], 100, ["name", "c1", "c2", "gap"])
    return top.select(top.name, top.c1, top.c2, top.gap)


def _persons(t: Tables, p: Params) -> Any:
    persons = p["persons"]
    assert isinstance(persons, list)
    first = t["person.firstName"]
    wanted = frozenset(persons)
    asked = pw.apply_with_type(lambda x: x in wanted, bool, first.c0)
    return first.filter(asked).select(who=pw.this.c0)


def _is1(t: Tables, p: Params) -> Any:
    who = _persons(t, p)
    out = who
    names = ["firstName", "lastName", "birthday", "locationIP", "browserUsed", "city",
             "gender", "creationDate"]  # fmt: skip
    for attr in names:
        table = t["person_isLocatedIn_place" if attr == "city" else f"person.{attr}"]
        out = out.join(table, out.who == table.c0).select(
            *(out[c] for c in out.column_names()), **{attr: table.c1}
        )
    return _distinct(out, "who", *names)


def _is3(t: Tables, p: Params) -> Any:
    who = _persons(t, p)
    knows = t["person_knows_person"]
    both = knows.select(a=knows.c0, b=knows.c1, d=knows.c2).concat_reindex(
        knows.select(a=knows.c1, b=knows.c0, d=knows.c2)
    )
    mine = both.join(who, both.a == who.who).select(who=both.a, f=both.b, d=both.d)
    first, last = t["person.firstName"], t["person.lastName"]
    named = mine.join(first, mine.f == first.c0).select(mine.who, mine.f, mine.d, fn=first.c1)
    named = named.join(last, named.f == last.c0).select(
        named.who, named.f, named.d, named.fn, ln=last.c1
    )
    return _distinct(named, "who", "f", "d", "fn", "ln")


def _is2(t: Tables, p: Params) -> Any:
    who = _persons(t, p)
    creator, md = _messages(t, "_hasCreator_person"), _messages(t, "creationDate")
    mine = creator.join(who, creator.c1 == who.who).select(who=who.who, m=creator.c0)
    dated = mine.join(md, mine.m == md.c0).select(mine.who, mine.m, d=md.c1)
    last = _top(dated, pw.make_tuple(-dated.d, -dated.m), ["who"], 10, ["m", "d"])
    reply = t["comment_replyOf_comment"]

    def step(up: Any, reply: Any) -> dict[str, Any]:
        new = up.join(reply, up.x == reply.c0).select(m=up.m, x=reply.c1)
        return {"up": _distinct(up.concat_reindex(new), "m", "x")}

    up = pw.iterate(step, up=pw.iterate_universe(last.select(last.m, x=last.m)), reply=reply)
    up = up["up"]
    to_post, post = t["comment_replyOf_post"], t["post"]
    roots = up.join(to_post, up.x == to_post.c0).select(up.m, r=to_post.c1)
    roots = roots.concat_reindex(last.join(post, last.m == post.c0).select(last.m, r=last.m))
    content, image, said = t["post.content"], t["post.imageFile"], t["comment.content"]
    texts = content.filter(content.c1 != "").select(m=pw.this.c0, x=pw.this.c1)
    photos = content.filter(content.c1 == "")
    texts = texts.concat_reindex(
        photos.join(image, photos.c0 == image.c0).select(m=photos.c0, x=image.c1),
        said.select(m=said.c0, x=said.c1),
    )
    rows = last.join(texts, last.m == texts.m).select(last.who, last.m, last.d, texts.x)
    rows = rows.join(roots, rows.m == roots.m).select(*_all(rows), r=roots.r)
    author = t["post_hasCreator_person"]
    rows = rows.join(author, rows.r == author.c0).select(*_all(rows), a=author.c1)
    first, family = t["person.firstName"], t["person.lastName"]
    rows = rows.join(first, rows.a == first.c0).select(*_all(rows), fn=first.c1)
    rows = rows.join(family, rows.a == family.c0).select(*_all(rows), ln=family.c1)
    return _distinct(rows, "who", "m", "d", "x", "r", "a", "fn", "ln")


def _all(table: Any) -> list[Any]:
    return [table[c] for c in table.column_names()]


ANSWERS: dict[str, Builder] = {
    "reach": _reach,
    "tc": _tc,
    "triangles": _triangles,
    "clique4": _clique4,
    "star7": _star,
    "bi11": _bi11,
    "bi2": _bi2,
    "is1": _is1,
    "is2": _is2,
    "is3": _is3,
}
COUNTED = frozenset({"reach", "tc", "triangles", "clique4", "star7", "bi11"})
