"""Spark loaders produce exactly the relations a plain pyarrow load produces."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from datalog import Database
from datalog.io.sources.csv import FactFile, read_facts
from datalog.lang.errors import TransactionError
from tests.spark.conftest import LDBC

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DECLS = ".decl edge(x: number, y: number)\n.decl label(x: number, s: symbol, w: float)\n"
LABELS = [(i % 7, f"s{i % 5}", i / 4) for i in range(40)] + [(1, "", 0.0)]


def rows_of(db: Database, relation: str, arity: int) -> set[tuple[Any, ...]]:
    return set(db.query(f"{relation}({', '.join(f'v{i}' for i in range(arity))})"))


@pytest.mark.parametrize("deduplicate", [True, False], ids=["deduplicated", "as-is"])
def test_csv_and_parquet_load_like_pyarrow(
    spark: SparkSession, tmp_path: Path, deduplicate: bool
) -> None:
    from datalog.io.sources.spark import load_frames, read_csv, read_parquet

    (tmp_path / "label.facts").write_text("".join(f"{a}\t{b}\t{c}\n" for a, b, c in LABELS))
    pq.write_table(pa.table({"x": [1, 2, 2, 3], "y": [2, 3, 3, 1]}), tmp_path / "edge.parquet")
    spark_db, plain_db = Database(), Database()
    for db in (spark_db, plain_db):
        db.define(DECLS)
    label, edge = spark_db.checked.schema["label"], spark_db.checked.schema["edge"]
    frames = {
        "label": read_csv(spark, tmp_path / "label.facts", label),
        "edge": read_parquet(spark, tmp_path / "edge.parquet", edge),
    }
    counts = load_frames(
        spark_db, frames, deduplicate=deduplicate, partitions=3 if deduplicate else None
    )
    with plain_db.transaction() as tx:
        tx.insert("label", read_facts(FactFile(label, tmp_path / "label.facts")))
        tx.insert("edge", pq.read_table(tmp_path / "edge.parquet"))
    if deduplicate:  # duplicates dropped by Spark
        assert counts == {"label": len(set(LABELS)), "edge": 3}
    else:  # by the database
        assert counts == {"label": len(LABELS), "edge": 4}
    assert rows_of(spark_db, "label", 3) == rows_of(plain_db, "label", 3) == set(LABELS)
    assert rows_of(spark_db, "edge", 2) == rows_of(plain_db, "edge", 2)


def test_transaction_insert_takes_a_spark_dataframe(spark: SparkSession) -> None:
    db = Database()
    db.define(DECLS)
    with db.transaction() as tx:
        tx.insert("label", spark.createDataFrame(LABELS[:3], "x long, s string, w double"))
        with pytest.raises(TransactionError, match=r"has columns \(x, s, w\)"):  # not by position
            tx.insert("label", spark.createDataFrame(LABELS[:3], "a long, b string, c double"))
        tx.insert("label", spark.createDataFrame(LABELS[3:4]))  # _1, _2, _3: unnamed
    assert rows_of(db, "label", 3) == set(LABELS[:4])


def ldbc_table(name: str) -> pa.Table:
    paths = [p for p in sorted(Path(LDBC).rglob(f"{name}_*_*.csv")) if p.stem[:-4] == name]
    options = pacsv.ParseOptions(delimiter="|", quote_char=False)
    convert = pacsv.ConvertOptions(strings_can_be_null=False)
    return pa.concat_tables(
        pacsv.read_csv(p, parse_options=options, convert_options=convert) for p in paths
    )


@pytest.mark.skipif(not Path(LDBC).is_dir(), reason="no LDBC SNB sample")
def test_ldbc_persons_and_knows_match_a_pyarrow_reading(spark: SparkSession) -> None:
    from datalog.io.sources.spark import load_ldbc

    db = Database()
    counts = load_ldbc(db, spark, LDBC, files=["person", "person_knows_person"], partitions=2)
    person, knows = ldbc_table("person").to_pylist(), ldbc_table("person_knows_person")
    edges = set(zip(knows.column(0).to_pylist(), knows.column(1).to_pylist(), strict=True))
    assert rows_of(db, "person_knows_person", 2) == edges
    assert counts["person_knows_person"] == len(edges)
    assert rows_of(db, "person.firstName", 2) == {(p["id"], p["firstName"]) for p in person}
    assert rows_of(db, "person.birthday", 2) == {(p["id"], p["birthday"]) for p in person}
    emails = {(p["id"], e) for p in person for e in str(p["email"]).split(";") if e}
    assert rows_of(db, "person.email", 2) == emails
    assert db.checked.schema["person.email"].types == ("number", "symbol")


@pytest.mark.skipif(not Path(LDBC).is_dir(), reason="no LDBC SNB sample")
def test_friends_of_friends_on_spark_equals_the_embedded_engine(spark: SparkSession) -> None:
    from datalog.io.sources.spark import ldbc_relations
    from datalog.io.spark.evaluate import evaluate
    from datalog.lang.checks import check_program
    from datalog.lang.parser import parse_program

    relations = ldbc_relations(spark, LDBC, ["person_knows_person"])
    rules = """
        .decl fof(p: number, q: number)
        fof(p, r) :- person_knows_person(p, q), person_knows_person(q, r), p != r,
                     !person_knows_person(p, r).
        .decl friends(p: number, n: number)
        friends(p, n) :- person_knows_person(p, _), n = count : { person_knows_person(p, _) }.
    """
    decls = "\n".join(r.declaration() for r in relations.values())
    db = Database()
    db.define(decls + rules)
    knows = relations["person_knows_person"].frame
    with db.transaction() as tx:
        tx.insert("person_knows_person", knows)
    checked = check_program(parse_program(decls + rules))
    result = evaluate(spark, checked, {n: r.frame for n, r in relations.items()})
    for name in ("fof", "friends"):
        assert {tuple(r) for r in result[name].collect()} == rows_of(db, name, 2)
