"""The benchmark suite's workloads: what each computes, in Deltalog's Datalog.

Layer: bench — may import anything public from deltalog packages and peers.
A workload is a Datalog program (rules over the dataset's relations) and one or more
queries; its answer is the set of distinct rows of its queries (for the short reads,
one query per person, each row prefixed by the person). Every peer reports the answer's
size and, for workloads with `columns` (top-k and point queries, where a count says
little), a digest of its rows (`bench.answers`). Peers hold their own translations
(SQL, Cypher, ASP, Pathway tables, ...) keyed by `Workload.name`. Parameters (a
source node, a country, a tag class, dates, persons) are chosen from the data by
`params`, deterministically, so every system answers the same question.

Graph workloads read `e(c0, c1)`; social workloads read the relations of
`bench.ldbc.to_relations` (binary attributes `person.firstName(c0, c1)`, edges such as
`person_knows_person(c0, c1, c2)`), only those listed in `Workload.inputs`.
Incremental runs stream retractions, then re-insertions, of rows of `Workload.stream`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import DATA_DIR
from bench.ldbc import Relations

__all__ = ["PERSON_ATTRS", "WORKLOADS", "Params", "Workload", "params", "query_keys"]

Params = dict[str, int | str | list[int]]
DAY_MS = 86_400_000
PARAMS_DIR = DATA_DIR / "ldbc-snb" / "substitution_parameters"


@dataclass(frozen=True)
class Workload:
    """A named computation: `rules(p)` and `queries(p)` are Datalog text for params `p`."""

    name: str
    kind: str  # "graph" (relation e) or "social" (LDBC relations)
    summary: str
    stream: str | None  # relation whose rows incremental runs retract and re-insert
    rules: Callable[[Params], str]
    queries: Callable[[Params], list[str]]
    inputs: tuple[str, ...] = ("e",)  # the relations it reads (only these are loaded)
    columns: tuple[str, ...] | None = None  # if set, answers are checked by content too

    def select(self, relations: Relations) -> Relations:
        """The relations this workload reads."""
        return {name: relations[name] for name in self.inputs}


def _none(_: Params) -> str:
    return ""


def _one(text: str) -> Callable[[Params], list[str]]:
    return lambda _: [text]


def _persons(p: Params) -> list[int]:
    persons = p["persons"]
    assert isinstance(persons, list)
    return persons


def _per_person(text: str) -> Callable[[Params], list[str]]:
    def queries(p: Params) -> list[str]:
        return [text.replace("$P", str(person)) for person in _persons(p)]

    return queries


def query_keys(workload: Workload, p: Params) -> list[tuple[int, ...]]:
    """The prefix of each Datalog query's rows in the answer: `(person,)` for the short
    reads asked one person at a time (IS 1, IS 3; IS 2's one query returns the person)."""
    queries = workload.queries(p)
    if "persons" in p and len(queries) > 1:
        return [(person,) for person in _persons(p)]
    return [() for _ in queries]


REACH = """.decl reach(y: number)
reach({source}).
reach(y) :- reach(x), e(x, y).
"""
TC = """.decl tc(x: number, y: number)
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
"""
MSG_DATE = """.decl msg_date(m: number, d: number)
msg_date(m, d) :- post.creationDate(m, d).
msg_date(m, d) :- comment.creationDate(m, d).
"""
MSG_TAG = """.decl msg_tag(m: number, t: number)
msg_tag(m, t) :- post_hasTag_tag(m, t).
msg_tag(m, t) :- comment_hasTag_tag(m, t).
"""
MSG_CREATOR = """.decl msg_creator(m: number, p: number)
msg_creator(m, p) :- post_hasCreator_person(m, p).
msg_creator(m, p) :- comment_hasCreator_person(m, p).
"""
# BI 2: every tag of the tag class (direct `hasType`), its message counts in the two
# windows (0 when none) and their absolute difference; then the first 100 by diff
# descending, tag name ascending: a row is kept when fewer than 100 rows precede it.
BI2 = """.decl bi2_tag(t: number, name: symbol)
bi2_tag(t, n) :- tagclass.name(c, "{tagclass}"), tag_hasType_tagclass(t, c), tag.name(t, n).
.decl bi2_count(name: symbol, c1: number, c2: number, diff: number)
bi2_count(n, c1, c2, diff) :- bi2_tag(t, n),
    c1 = count : {{ msg_tag(m, t), msg_date(m, d), d >= {d1}, d < {d2} }},
    c2 = count : {{ msg_tag(m, t), msg_date(m, d), d >= {d2}, d < {d3} }},
    diff = max(c1 - c2, c2 - c1).
.decl bi2(name: symbol, c1: number, c2: number, diff: number)
bi2(n, c1, c2, diff) :- bi2_count(n, c1, c2, diff),
    a = count : {{ bi2_count(n2, _, _, d2), d2 > diff }},
    b = count : {{ bi2_count(n2, _, _, diff), n2 < n }}, a + b < 100.
"""
# BI 11: friendships created in [start, end], each pair once as (low, high); persons
# living in a city of the country. Triangles a < b < c are the distinct triples.
BI11 = """.decl knows_w(a: number, b: number)
knows_w(a, b) :- person_knows_person(a, b, d), a < b, d >= {start}, d <= {end}.
knows_w(b, a) :- person_knows_person(a, b, d), b < a, d >= {start}, d <= {end}.
.decl local(p: number)
local(p) :- place.name(c, "{country}"), place.type(c, "country"),
    place_isPartOf_place(city, c), person_isLocatedIn_place(p, city).
"""
# IS 2: each person's 10 latest messages (date descending, id descending), the text
# (content, or the image file of a photo post), the root post of the reply tree, found
# by walking up from these messages only, and its author's names. A message is among
# the 10 latest when fewer than 10 messages of its author come before it. Counting
# that over all pairs is quadratic in a person's messages, so only the candidates are
# ranked: messages of days with fewer than 10 later messages (which include
# everything that comes before a candidate). One query answers all persons.
IS2 = """.decl is2_person(p: number)
{persons}
.decl is2_msg(p: number, m: number, d: number, day: number)
is2_msg(p, m, d, day) :- is2_person(p), msg_creator(m, p), msg_date(m, d), day = d / 86400000.
.decl is2_day(p: number, day: number, n: number)
is2_day(p, day, n) :- is2_msg(p, _, _, day), n = count : {{ is2_msg(p, m, _, day) }}.
.decl is2_later(p: number, day: number, k: number)
is2_later(p, day, k) :- is2_day(p, day, _), k = sum n : {{ is2_day(p, day2, n), day2 > day }}.
.decl is2_cand(p: number, m: number, d: number)
is2_cand(p, m, d) :- is2_msg(p, m, d, day), is2_later(p, day, k), k < 10.
.decl is2_last(p: number, m: number, d: number)
is2_last(p, m, d) :- is2_cand(p, m, d),
    a = count : {{ is2_cand(p, m2, d2), d2 > d }},
    b = count : {{ is2_cand(p, m2, d), m2 > m }}, a + b < 10.
.decl is2_up(m: number, x: number)
is2_up(m, m) :- is2_last(_, m, _).
is2_up(m, y) :- is2_up(m, x), comment_replyOf_comment(x, y).
.decl is2_root(m: number, r: number)
is2_root(m, m) :- is2_last(_, m, _), post(m).
is2_root(m, r) :- is2_up(m, x), comment_replyOf_post(x, r).
.decl msg_text(m: number, x: symbol)
msg_text(m, x) :- post.content(m, x), x != "".
msg_text(m, x) :- post.content(m, ""), post.imageFile(m, x).
msg_text(m, x) :- comment.content(m, x).
"""
IS2_QUERY = (
    "is2_last(p, m, d), msg_text(m, x), is2_root(m, r), post_hasCreator_person(r, a), "
    "person.firstName(a, fn), person.lastName(a, ln)"
)
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

IS1_INPUTS = (*(f"person.{a}" for a in PERSON_ATTRS), "person_isLocatedIn_place")
IS1_COLUMNS = ("firstName", "lastName", "birthday", "locationIP", "browserUsed", "city.id",
               "gender", "creationDate")  # fmt: skip
IS2_COLUMNS = ("message.id", "creationDate", "content", "post.id", "originalPoster.id",
               "originalPoster.firstName", "originalPoster.lastName")  # fmt: skip
BI2_INPUTS = ("tagclass.name", "tag_hasType_tagclass", "tag.name", "post_hasTag_tag",
              "comment_hasTag_tag", "post.creationDate", "comment.creationDate")  # fmt: skip
BI11_INPUTS = ("person_knows_person", "person_isLocatedIn_place", "place_isPartOf_place",
               "place.name", "place.type")  # fmt: skip
IS2_INPUTS = ("post", "post_hasCreator_person", "comment_hasCreator_person",
              "post.creationDate", "comment.creationDate", "post.content", "post.imageFile",
              "comment.content", "comment_replyOf_post", "comment_replyOf_comment",
              "person.firstName", "person.lastName")  # fmt: skip


def _is2_rules(p: Params) -> str:
    facts = "\n".join(f"is2_person({person})." for person in _persons(p))
    return MSG_DATE + MSG_CREATOR + IS2.format(persons=facts)


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
            inputs=tuple(f"person.{a}" for a in PERSON_ATTRS),
        ),
        Workload(
            "bi2",
            "social",
            "BI 2: tag evolution, top 100 tags of a class by count change between windows",
            "post_hasTag_tag",
            lambda p: MSG_DATE + MSG_TAG + BI2.format(**p),
            _one("bi2(name, c1, c2, diff)"),
            inputs=BI2_INPUTS,
            columns=("tag.name", "countWindow1", "countWindow2", "diff"),
        ),
        Workload(
            "bi11",
            "social",
            "BI 11: friend triangles within one country, friendships in a date range",
            "person_knows_person",
            lambda p: BI11.format(**p),
            _one("knows_w(a, b), knows_w(b, c), knows_w(a, c), local(a), local(b), local(c)"),
            inputs=BI11_INPUTS,
        ),
        Workload(
            "is1",
            "social",
            "IS 1: profile of a person",
            None,
            _none,
            _per_person(IS1),
            inputs=IS1_INPUTS,
            columns=IS1_COLUMNS,
        ),
        Workload(
            "is2",
            "social",
            "IS 2: a person's 10 latest messages, their root post and its author",
            None,
            _is2_rules,
            _one(IS2_QUERY),
            inputs=IS2_INPUTS,
            columns=IS2_COLUMNS,
        ),
        Workload(
            "is3",
            "social",
            "IS 3: friends of a person, with names and since when",
            None,
            lambda _: KNOWS_SYM,
            _per_person("knows_sym($P, f, d), person.firstName(f, fn), person.lastName(f, ln)"),
            inputs=("person_knows_person", "person.firstName", "person.lastName"),
            columns=("friend.id", "knows.creationDate", "friend.firstName", "friend.lastName"),
        ),
    ]
}


def _col(relations: Relations, name: str, i: int) -> np.ndarray:
    return np.asarray(relations[name].column(i).to_numpy(), dtype=np.int64)


def _day(ms: float) -> int:
    """Midnight (UTC) of the day holding epoch-millisecond `ms`."""
    return int(ms) // DAY_MS * DAY_MS


def params(workload: Workload, relations: Relations, persons: int = 10) -> Params:
    """The parameters of `workload` on `relations` (deterministic).

    No BI substitution parameters ship with the data, so they follow the spec's recipe
    on the data at hand: BI 11's country is the one with most persons, its 100-day
    range of friendships starts 130 days before the last friendship; BI 2's tag class
    is the one whose tags have most messages and its first window starts on the day
    of the median message date. The short reads use the persons of the Interactive
    substitution parameters when the data holds them all (the LDBC sample), else
    `persons` persons drawn with seed 0.
    """
    if workload.name == "reach":
        return {"source": int(np.argmax(np.bincount(_col(relations, "e", 0))))}
    if workload.name == "bi11":
        start = _day(_col(relations, "person_knows_person", 2).max()) - 130 * DAY_MS
        return {"country": _biggest_country(relations), "start": start, "end": start + 100 * DAY_MS}
    if workload.name == "bi2":
        dates = np.concatenate(
            [_col(relations, f"{kind}.creationDate", 1) for kind in ("post", "comment")]
        )
        d1 = _day(float(np.median(dates)))
        return {
            "tagclass": _busiest_tagclass(relations),
            "d1": d1,
            "d2": d1 + 100 * DAY_MS,
            "d3": d1 + 200 * DAY_MS,
        }
    if workload.name.startswith("is"):
        ids = np.sort(_col(relations, "person", 0))
        given = _parameter_persons(ids)
        if len(given) >= persons:
            return {"persons": sorted(given[:persons])}
        rng = np.random.default_rng(0)
        picked = rng.choice(ids, size=min(persons, ids.size), replace=False)
        return {"persons": sorted(int(x) for x in picked)}
    return {}


def _parameter_persons(ids: np.ndarray) -> list[int]:
    """Person ids of the Interactive substitution parameters, in file order, if every
    one of them is in `ids`; else []."""
    found: list[int] = []
    for path in sorted(PARAMS_DIR.glob("interactive_*_param.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if lines and lines[0].split("|")[0] in ("personId", "person1Id"):
            found += [int(line.split("|")[0]) for line in lines[1:] if line.strip()]
    unique = list(dict.fromkeys(found))
    return unique if unique and bool(np.isin(unique, ids).all()) else []


def _name_of(relations: Relations, entity: str, key: int) -> str:
    names = relations[f"{entity}.name"]
    mask = pc.equal(names.column(0), pa.scalar(key, pa.int64()))
    return str(names.filter(mask).column(1)[0].as_py())


def _biggest_country(relations: Relations) -> str:
    """The name of the country with the most persons located in its cities."""
    city_of = relations["person_isLocatedIn_place"]
    part_of: pa.Table = relations["place_isPartOf_place"]
    joined = city_of.join(part_of, "c1", "c0", join_type="inner", right_suffix="_r")
    countries = np.asarray(joined.column(joined.num_columns - 1).to_numpy(), dtype=np.int64)
    values, counts = np.unique(countries, return_counts=True)
    return _name_of(relations, "place", int(values[np.argmax(counts)]))


def _busiest_tagclass(relations: Relations) -> str:
    """The name of the tag class whose tags are on most messages (ties: lowest id)."""
    tags = np.concatenate([_col(relations, f"{k}_hasTag_tag", 1) for k in ("post", "comment")])
    per_tag = np.bincount(tags)
    has_type = relations["tag_hasType_tagclass"]
    tag, cls = (
        _col(relations, "tag_hasType_tagclass", 0),
        _col(relations, "tag_hasType_tagclass", 1),
    )
    del has_type
    weights = np.where(tag < per_tag.size, per_tag[np.minimum(tag, per_tag.size - 1)], 0)
    totals = np.bincount(cls, weights=weights)
    return _name_of(relations, "tagclass", int(np.argmax(totals)))
