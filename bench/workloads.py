"""The benchmark suite's workloads: what each computes, in Deltalog's Datalog.

Layer: bench — may import anything public from deltalog packages and peers.
A workload is a Datalog program (rules over the dataset's relations) and one or more
queries; its answer size is the total number of distinct rows of its queries. Peers
hold their own translations (SQL, Cypher, ASP, ...) keyed by `Workload.name`.
Parameters (a source node, a country, dates, persons) are chosen from the data by
`params`, deterministically, so every system answers the same question.

Graph workloads read `e(c0, c1)`; social workloads read the relations of
`bench.ldbc.to_relations` (binary attributes `person.firstName(c0, c1)`, edges such as
`person_knows_person(c0, c1, c2)`). Incremental runs stream retractions, then
re-insertions, of rows of `Workload.stream`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bench.ldbc import Relations

__all__ = ["PERSON_ATTRS", "WORKLOADS", "Params", "Workload", "params"]

Params = dict[str, int | list[int]]
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Workload:
    """A named computation: `rules(p)` and `queries(p)` are Datalog text for params `p`."""

    name: str
    kind: str  # "graph" (relation e) or "social" (LDBC relations)
    summary: str
    stream: str | None  # relation whose rows incremental runs retract and re-insert
    rules: Callable[[Params], str]
    queries: Callable[[Params], list[str]]


def _none(_: Params) -> str:
    return ""


def _one(text: str) -> Callable[[Params], list[str]]:
    return lambda _: [text]


def _per_person(text: str) -> Callable[[Params], list[str]]:
    def queries(p: Params) -> list[str]:
        persons = p["persons"]
        assert isinstance(persons, list)
        return [text.replace("$P", str(person)) for person in persons]

    return queries


REACH = """.decl reach(y: number)
reach({source}).
reach(y) :- reach(x), e(x, y).
"""
TC = """.decl tc(x: number, y: number)
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
"""
BI11 = """.decl knows(a: number, b: number)
knows(a, b) :- person_knows_person(a, b, _), a < b.
knows(b, a) :- person_knows_person(a, b, _), b < a.
.decl local(p: number)
local(p) :- person_isLocatedIn_place(p, city), place_isPartOf_place(city, {country}).
"""
MESSAGES = """.decl msg_date(m: number, d: number)
msg_date(m, d) :- post.creationDate(m, d).
msg_date(m, d) :- comment.creationDate(m, d).
.decl msg_tag(m: number, t: number)
msg_tag(m, t) :- post_hasTag_tag(m, t).
msg_tag(m, t) :- comment_hasTag_tag(m, t).
.decl msg_creator(m: number, p: number)
msg_creator(m, p) :- post_hasCreator_person(m, p).
msg_creator(m, p) :- comment_hasCreator_person(m, p).
"""
BI2 = """.decl bi2(t: number, w: number, n: number)
bi2(t, 1, n) :- msg_tag(_, t),
    n = count : {{ msg_tag(m, t), msg_date(m, d), d >= {d0}, d < {d1} }}, n > 0.
bi2(t, 2, n) :- msg_tag(_, t),
    n = count : {{ msg_tag(m, t), msg_date(m, d), d >= {d1}, d < {d2} }}, n > 0.
"""
ROOT = """.decl root(m: number, p: number)
root(m, m) :- post(m).
root(c, p) :- comment_replyOf_post(c, p).
root(c, p) :- comment_replyOf_comment(c, parent), root(parent, p).
"""
KNOWS_SYM = """.decl knows_sym(a: number, b: number, d: number)
knows_sym(a, b, d) :- person_knows_person(a, b, d).
knows_sym(b, a, d) :- person_knows_person(a, b, d).
"""
PERSON_ATTRS = (
    "firstName",
    "lastName",
    "gender",
    "birthday",
    "creationDate",
    "locationIP",
    "browserUsed",
)
STAR7 = ", ".join(
    f"person.{attr}(p, {var})"
    for attr, var in zip(
        PERSON_ATTRS,
        "abcdefg",
        strict=True,
    )
)
IS1 = (
    "person.firstName($P, fn), person.lastName($P, ln), person.birthday($P, bd), "
    "person.locationIP($P, ip), person.browserUsed($P, br), person_isLocatedIn_place($P, city), "
    "person.gender($P, g), person.creationDate($P, cd)"
)

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload(
            "reach",
            "graph",
            "nodes reachable from the biggest hub (recursion)",
            "e",
            lambda p: REACH.format(**p),
            _one("reach(y)"),
        ),
        Workload(
            "tc", "graph", "transitive closure (recursion)", "e", lambda _: TC, _one("tc(x, y)")
        ),
        Workload(
            "triangles",
            "graph",
            "e(a,b), e(b,c), e(a,c) on an oriented undirected graph",
            "e",
            _none,
            _one("e(a, b), e(b, c), e(a, c)"),
        ),
        Workload(
            "clique4",
            "graph",
            "4-cliques: six edge atoms over a, b, c, d",
            "e",
            _none,
            _one("e(a, b), e(a, c), e(a, d), e(b, c), e(b, d), e(c, d)"),
        ),
        Workload(
            "star7",
            "social",
            "7-way star join of the person attributes",
            "person.firstName",
            _none,
            _one(STAR7),
        ),
        Workload(
            "bi2",
            "social",
            "BI 2, simplified: messages per tag in two 100-day windows",
            "post_hasTag_tag",
            lambda p: MESSAGES + BI2.format(**p),
            _one("bi2(t, w, n)"),
        ),
        Workload(
            "bi11",
            "social",
            "BI 11, simplified: friend triangles within one country",
            "person_knows_person",
            lambda p: BI11.format(**p),
            _one("knows(a, b), knows(b, c), knows(a, c), local(a), local(b), local(c)"),
        ),
        Workload("is1", "social", "IS 1: profile of a person", None, _none, _per_person(IS1)),
        Workload(
            "is2",
            "social",
            "IS 2, simplified: all messages of a person, their root post and its author",
            None,
            lambda _: MESSAGES + ROOT,
            _per_person(
                "msg_creator(m, $P), msg_date(m, d), root(m, r), post_hasCreator_person(r, a)"
            ),
        ),
        Workload(
            "is3",
            "social",
            "IS 3: friends of a person, with names and since when",
            None,
            lambda _: KNOWS_SYM,
            _per_person("knows_sym($P, f, d), person.firstName(f, fn), person.lastName(f, ln)"),
        ),
    ]
}


def _col(relations: Relations, name: str, i: int) -> np.ndarray:
    return np.asarray(relations[name].column(i).to_numpy(), dtype=np.int64)


def params(workload: Workload, relations: Relations, persons: int = 10) -> Params:
    """The parameters of `workload` on `relations` (deterministic)."""
    if workload.name == "reach":
        return {"source": int(np.argmax(np.bincount(_col(relations, "e", 0))))}
    if workload.name == "bi11":
        return {"country": _biggest_country(relations)}
    if workload.name == "bi2":
        d0 = int(np.median(_col(relations, "post.creationDate", 1)))
        return {"d0": d0, "d1": d0 + 100 * DAY_MS, "d2": d0 + 200 * DAY_MS}
    if workload.name.startswith("is"):
        ids = np.sort(_col(relations, "person", 0))
        rng = np.random.default_rng(0)
        picked = rng.choice(ids, size=min(persons, ids.size), replace=False)
        return {"persons": sorted(int(x) for x in picked)}
    return {}


def _biggest_country(relations: Relations) -> int:
    """The country (place) with the most persons located in its cities."""
    city_of = relations["person_isLocatedIn_place"]
    part_of: pa.Table = relations["place_isPartOf_place"]
    joined = city_of.join(part_of, "c1", "c0", join_type="inner", right_suffix="_r")
    countries = np.asarray(joined.column(joined.num_columns - 1).to_numpy(), dtype=np.int64)
    values, counts = np.unique(countries, return_counts=True)
    return int(values[np.argmax(counts)])
