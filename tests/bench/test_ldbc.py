"""The LDBC SNB CSV reader on a generated directory and on the shared sample if present.

Layer: bench (tests).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from bench import ldbc, ldbc_gen
from bench.datasets import LDBC_DIR
from datalog.db.database import Database

ATTRS = ["firstName", "lastName", "gender", "birthday", "creationDate", "locationIP"]


def test_generated_network_round_trips_through_csv(tmp_path: Path) -> None:
    raw = ldbc_gen.generate(0.002, seed=3)
    assert raw == ldbc_gen.generate(0.002, seed=3)  # seeded
    ldbc_gen.write_csv_dir(raw, tmp_path)
    assert (tmp_path / "dynamic" / "person_0_0.csv").read_text().startswith("id|firstName|")
    relations = ldbc.load(tmp_path)
    persons = raw["person"].num_rows
    assert persons == 20 and relations["person"].num_rows == persons
    for attr in [*ATTRS, "browserUsed"]:
        assert relations[f"person.{attr}"].num_rows == persons
    assert relations["person.birthday"].schema.types == [pa.int64(), pa.int64()]
    assert relations["person.firstName"].schema.types == [pa.int64(), pa.string()]
    knows = relations["person_knows_person"]
    assert knows.num_columns == 3 and knows.num_rows == raw["person_knows_person"].num_rows
    assert (
        relations["comment_replyOf_post"].num_rows + relations["comment_replyOf_comment"].num_rows
        == relations["comment"].num_rows
    )
    db = Database()
    ldbc.load_database(db, relations)
    star = ", ".join(f"person.{a}(p, v{i})" for i, a in enumerate(ATTRS))
    assert len(db.query(star)) == persons


@pytest.mark.skipif(not LDBC_DIR.is_dir(), reason="LDBC SNB sample not present")
def test_shared_ldbc_sample() -> None:
    relations = ldbc.load(LDBC_DIR)
    assert relations["person"].num_rows == 222
    assert relations["person.firstName"].num_rows == 222
    assert relations["person_knows_person"].num_rows == 825
    assert relations["tag"].num_rows == 16_080
    assert relations["post.creationDate"].schema.types[1] == pa.int64()
    assert relations["person.browserUsed"].column(1)[0].as_py() == "Internet Explorer"
