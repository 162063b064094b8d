"""DuckDB baselines for the graph benchmarks: reachability, closure, triangles.

Layer: bench — may import anything public from deltalog packages and peers.
Edges are loaded from numpy arrays through pyarrow (no Python loops) into one table
`e(src, dst)` with set semantics (duplicates dropped), as Datalog would hold them.
Each query returns its answer and the seconds it took; the load is timed apart
(`EdgeDB.load_seconds`). Recursive queries use `UNION` (set semantics), so they end
on cyclic graphs.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bench.answers import Answer, Tally
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import PERSON_ATTRS, Params, Workload

__all__ = ["DuckDBPeer", "EdgeDB", "reachability", "transitive_closure", "triangles"]

_REACH = """
WITH RECURSIVE reach(n) AS (
    SELECT CAST($source AS BIGINT)
    UNION
    SELECT e.dst FROM reach JOIN e ON e.src = reach.n
)
SELECT n FROM reach ORDER BY n
"""

_CLOSURE = """
WITH RECURSIVE tc(x, y) AS (
    SELECT src, dst FROM e
    UNION
    SELECT tc.x, e.dst FROM tc JOIN e ON e.src = tc.y
)
SELECT count(*) FROM tc
"""

# The directed pattern e(a,b), e(b,c), e(a,c): every match (a,b,c) counts once.
_TRIANGLES = """
SELECT count(*)
FROM e AS ab
JOIN e AS bc ON bc.src = ab.dst
JOIN e AS ac ON ac.src = ab.src AND ac.dst = bc.dst
"""


class EdgeDB:
    """An in-memory DuckDB database holding the edge set `e(src, dst)`.

    `load_seconds` is the time to load and deduplicate the edges; each query method
    returns `(answer, query_seconds)`.
    """

    def __init__(self, src: np.ndarray, dst: np.ndarray, *, threads: int | None = None) -> None:
        import duckdb  # the bench extra; imported here so `bench.peers` imports cheaply

        edges = _edge_table(src, dst)
        self._con: Any = duckdb.connect(":memory:")
        self._con.execute("SET enable_progress_bar = false")
        if threads is not None:
            self._con.execute(f"SET threads = {int(threads)}")
        start = time.perf_counter()
        self._con.register("edges_in", edges)
        self._con.execute("CREATE TABLE e AS SELECT DISTINCT src, dst FROM edges_in")
        self._con.unregister("edges_in")
        self.load_seconds = time.perf_counter() - start

    def reachability(self, source: int) -> tuple[np.ndarray, float]:
        """Nodes reachable from `source` by paths of length >= 0 (so `source` is included),
        sorted ascending as int64."""
        start = time.perf_counter()
        reached = self._con.execute(_REACH, {"source": int(source)}).fetchnumpy()["n"]
        seconds = time.perf_counter() - start
        return np.asarray(reached, dtype=np.int64), seconds

    def transitive_closure(self) -> tuple[int, float]:
        """The number of pairs (x, y) joined by a path of length >= 1."""
        return self._count(_CLOSURE)

    def triangles(self) -> tuple[int, float]:
        """The number of matches of e(a,b), e(b,c), e(a,c)."""
        return self._count(_TRIANGLES)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> EdgeDB:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _count(self, sql: str) -> tuple[int, float]:
        start = time.perf_counter()
        (count,) = self._con.execute(sql).fetchone()
        return int(count), time.perf_counter() - start


def reachability(src: np.ndarray, dst: np.ndarray, source: int) -> tuple[np.ndarray, float]:
    """Sorted nodes reachable from `source` (itself included) and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.reachability(source)


def transitive_closure(src: np.ndarray, dst: np.ndarray) -> tuple[int, float]:
    """The size of the transitive closure and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.transitive_closure()


def triangles(src: np.ndarray, dst: np.ndarray) -> tuple[int, float]:
    """The number of directed triangles e(a,b), e(b,c), e(a,c) and the query seconds."""
    with EdgeDB(src, dst) as db:
        return db.triangles()


def _edge_table(src: np.ndarray, dst: np.ndarray) -> pa.Table:
    src64 = np.ascontiguousarray(src, dtype=np.int64)
    dst64 = np.ascontiguousarray(dst, dtype=np.int64)
    if src64.ndim != 1 or src64.shape != dst64.shape:
        raise ValueError(f"src and dst must be 1-D of one length, got {src.shape}, {dst.shape}")
    return pa.table({"src": src64, "dst": dst64})


# -- the benchmark suite's adapter (bench.suite) ------------------------------------


def _t(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: object) -> str:
    """A parameter as SQL text: strings quoted, numbers as they are."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


_SUITE_SQL: dict[str, str] = {
    "reach": """WITH RECURSIVE reach(n) AS (SELECT CAST({source} AS BIGINT)
        UNION SELECT e.c1 FROM reach JOIN e ON e.c0 = reach.n) SELECT count(*) FROM reach""",
    "tc": """WITH RECURSIVE tc(x, y) AS (SELECT c0, c1 FROM e
        UNION SELECT tc.x, e.c1 FROM tc JOIN e ON e.c0 = tc.y) SELECT count(*) FROM tc""",
    "triangles": """SELECT count(*) FROM e ab JOIN e bc ON bc.c0 = ab.c1
        JOIN e ac ON ac.c0 = ab.c0 AND ac.c1 = bc.c1""",
    "clique4": """SELECT count(*) FROM e ab JOIN e ac ON ac.c0 = ab.c0
        JOIN e ad ON ad.c0 = ab.c0 JOIN e bc ON bc.c0 = ab.c1 AND bc.c1 = ac.c1
        JOIN e bd ON bd.c0 = ab.c1 AND bd.c1 = ad.c1
        JOIN e cd ON cd.c0 = ac.c1 AND cd.c1 = ad.c1""",
    "star7": "SELECT count(*) FROM "
    + " JOIN ".join(
        f"{_t('person.' + a)} {a} USING (c0)" if i else f"{_t('person.' + a)} {a}"
        for i, a in enumerate(PERSON_ATTRS)
    ),
    "bi11": """WITH k AS (SELECT DISTINCT least(c0, c1) a, greatest(c0, c1) b
            FROM person_knows_person WHERE c0 <> c1 AND c2 BETWEEN {start} AND {end}),
        l AS (SELECT DISTINCT p.c0 FROM person_isLocatedIn_place p
            JOIN place_isPartOf_place c ON p.c1 = c.c0 JOIN "place.name" n ON n.c0 = c.c1
            JOIN "place.type" ty ON ty.c0 = c.c1 WHERE n.c1 = {country} AND ty.c1 = 'country')
        SELECT count(*) FROM k ab JOIN k bc ON bc.a = ab.b JOIN k ac ON ac.a = ab.a AND ac.b = bc.b
        WHERE ab.a IN (SELECT c0 FROM l) AND ab.b IN (SELECT c0 FROM l)
          AND bc.b IN (SELECT c0 FROM l)""",
    "bi2": """WITH mt AS (SELECT c0 m, c1 t FROM post_hasTag_tag
            UNION SELECT c0, c1 FROM comment_hasTag_tag),
        md AS (SELECT c0 m, c1 d FROM "post.creationDate"
            UNION SELECT c0, c1 FROM "comment.creationDate"),
        tags AS (SELECT DISTINCT ht.c0 t, tn.c1 name FROM tag_hasType_tagclass ht
            JOIN "tagclass.name" cn ON cn.c0 = ht.c1 JOIN "tag.name" tn ON tn.c0 = ht.c0
            WHERE cn.c1 = {tagclass}),
        w AS (SELECT mt.t, count(DISTINCT CASE WHEN d >= {d1} AND d < {d2} THEN mt.m END) c1,
                count(DISTINCT CASE WHEN d >= {d2} AND d < {d3} THEN mt.m END) c2
            FROM mt JOIN md USING (m) WHERE mt.t IN (SELECT t FROM tags) GROUP BY mt.t),
        counts AS (SELECT DISTINCT name, coalesce(c1, 0) c1, coalesce(c2, 0) c2
            FROM tags LEFT JOIN w USING (t))
        SELECT name, c1, c2, abs(c1 - c2) diff FROM counts
        ORDER BY diff DESC, name ASC LIMIT 100""",
    "is1": """SELECT DISTINCT fn.c1, ln.c1, bd.c1, ip.c1, br.c1, city.c1, g.c1, cd.c1
        FROM "person.firstName" fn JOIN "person.lastName" ln USING (c0)
        JOIN "person.birthday" bd USING (c0) JOIN "person.locationIP" ip USING (c0)
        JOIN "person.browserUsed" br USING (c0) JOIN person_isLocatedIn_place city USING (c0)
        JOIN "person.gender" g USING (c0) JOIN "person.creationDate" cd USING (c0)
        WHERE c0 = {person}""",
    "is2": """WITH RECURSIVE
        mine AS (SELECT c0 m FROM post_hasCreator_person WHERE c1 = {person}
            UNION SELECT c0 FROM comment_hasCreator_person WHERE c1 = {person}),
        md AS (SELECT c0 m, c1 d FROM "post.creationDate"
            UNION SELECT c0, c1 FROM "comment.creationDate"),
        latest AS (SELECT m, d FROM mine JOIN md USING (m) ORDER BY d DESC, m DESC LIMIT 10),
        up(m, x) AS (SELECT m, m FROM latest
            UNION SELECT up.m, r.c1 FROM up JOIN comment_replyOf_comment r ON r.c0 = up.x),
        root(m, r) AS (SELECT m, m FROM latest WHERE m IN (SELECT c0 FROM post)
            UNION SELECT up.m, rp.c1 FROM up JOIN comment_replyOf_post rp ON rp.c0 = up.x),
        txt(m, x) AS (SELECT c0, c1 FROM "post.content" WHERE c1 <> ''
            UNION SELECT c.c0, i.c1 FROM "post.content" c JOIN "post.imageFile" i USING (c0)
                WHERE c.c1 = ''
            UNION SELECT c0, c1 FROM "comment.content")
        SELECT DISTINCT latest.m, latest.d, txt.x, root.r, a.c1, fn.c1, ln.c1 FROM latest
            JOIN txt USING (m) JOIN root USING (m)
            JOIN post_hasCreator_person a ON a.c0 = root.r
            JOIN "person.firstName" fn ON fn.c0 = a.c1 JOIN "person.lastName" ln ON ln.c0 = a.c1""",
    "is3": """WITH ks AS (SELECT c0 a, c1 b, c2 d FROM person_knows_person
            UNION SELECT c1, c0, c2 FROM person_knows_person)
        SELECT DISTINCT ks.b, ks.d, fn.c1, ln.c1 FROM ks
            JOIN "person.firstName" fn ON fn.c0 = ks.b JOIN "person.lastName" ln ON ln.c0 = ks.b
            WHERE ks.a = {person}""",
}


class DuckDBPeer(Peer):
    """DuckDB (in memory): each workload is one SQL count; updates re-run the query."""

    name = "duckdb"
    module = "duckdb"
    distribution = "duckdb"
    workloads: ClassVar[frozenset[str]] = frozenset(_SUITE_SQL)
    incremental = "recompute"

    def __init__(self) -> None:
        import duckdb

        self._con: Any = duckdb.connect(":memory:")
        self._con.execute("SET enable_progress_bar = false")

    def load(self, relations: Relations) -> None:
        for name, table in relations.items():
            self._con.register("incoming", table)
            self._con.execute(f"CREATE TABLE {_t(name)} AS SELECT DISTINCT * FROM incoming")
            self._con.unregister("incoming")

    def run(self, workload: Workload, params: Params) -> Answer:
        sql = _SUITE_SQL[workload.name]
        persons = params.get("persons")
        if isinstance(persons, list):
            texts = [sql.format(person=p) for p in persons]
        else:
            texts = [sql.format(**{k: _literal(v) for k, v in params.items()})]
        tally = Tally(workload.columns is not None)
        keys = [(p,) for p in persons] if isinstance(persons, list) else [()]
        for key, text in zip(keys, texts, strict=True):
            rows = self._con.execute(text).fetchall()
            if tally.digest_rows:  # the rows themselves (few: top-k and point queries)
                for row in rows:
                    tally.add(key + tuple(row), 1)
            else:
                tally.size += int(rows[0][0])
        return tally.answer()

    def change(self, relation: str, rows: pa.Table, insert: bool) -> None:
        self._con.register("delta", rows)
        if insert:
            self._con.execute(f"INSERT INTO {_t(relation)} SELECT DISTINCT * FROM delta")
        else:
            match = " AND ".join(f"t.{c} = delta.{c}" for c in rows.column_names)
            self._con.execute(f"DELETE FROM {_t(relation)} t USING delta WHERE {match}")
        self._con.unregister("delta")
