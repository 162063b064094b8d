"""A seeded, vectorized generator of LDBC SNB-shaped social networks.

Layer: bench — may import anything public from deltalog packages and peers.
`generate(scale_factor, seed)` returns the raw tables of the LDBC SNB Interactive CSV
layout (`person`, `person_knows_person`, `post`, `comment`, their `hasCreator`,
`hasTag`, `replyOf`, `isLocatedIn` edges, `tag`, `tagclass`, `tag_hasType_tagclass`,
`tagclass_isSubclassOf_tagclass`, `place`, `place_isPartOf_place`),
keyed by file stem, with the LDBC column headers; `write_csv_dir` writes them as
`static/` and `dynamic/` directories of `|`-separated `<stem>_0_0.csv` files, which
`bench.ldbc.read_raw` reads back. Sizes follow LDBC's SF1 shape scaled linearly:
10,000 persons, ~18 knows, ~100 posts and ~200 comments per person, 71 tag classes.
Posts have `content` or, for a third of them (photos), an `imageFile` and empty
content, as LDBC's do; comments have `content`. Skew (popular names, countries, tags,
tag classes, creators) is drawn from power laws; nothing loops per row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from bench.generators import power_law_graph

__all__ = ["STATIC", "generate", "write_csv_dir"]

STATIC = ("tag", "tagclass", "tag_hasType_tagclass", "tagclass_isSubclassOf_tagclass",
          "place", "place_isPartOf_place")  # fmt: skip
FIRST = "Ada Alan Ana Bo Carl Chen Dan Eva Fritz Hans Ivan Jose Kim Lea Li Mia Omar Raj Yang Zoe"
LAST = "Alonso Bauer Chen Diaz Garcia Ito Khan Kumar Lee Li Martin Muller Nguyen Rossi Silva Wang"
WORDS = ["yes", "thanks", "great", "no way", "ok", "cool", "About a tag", "I see", "maybe"]
N_TAGCLASSES = 71
BROWSERS = ["Firefox", "Chrome", "Internet Explorer", "Safari", "Opera"]
DAY_MS = 86_400_000
START_MS = 1_262_304_000_000  # 2010-01-01
SPAN_MS = 3 * 365 * DAY_MS
N_COUNTRIES, CITIES_PER_COUNTRY = 20, 10
# Ids of each entity kind live in their own range, as LDBC's do.
POST_BASE, COMMENT_BASE = 1 << 32, 1 << 40


def generate(scale_factor: float = 0.01, seed: int = 0) -> dict[str, pa.Table]:
    """The raw LDBC tables of a network of `round(10_000 * scale_factor)` persons (>= 20)."""
    rng = np.random.default_rng(seed)
    n_persons = max(20, round(10_000 * scale_factor))
    tables = _places()
    n_tags = max(100, min(16_080, round(16_080 * scale_factor**0.5)))
    tags = np.arange(n_tags, dtype=np.int64)
    tables["tag"] = pa.table({"id": tags, "name": _label("Tag", tags)})
    tables.update(_tagclasses(rng, tags))
    persons = np.arange(n_persons, dtype=np.int64)
    tables["person"] = _persons(rng, persons)
    cities = N_COUNTRIES + _zipf(rng, N_COUNTRIES, n_persons) * CITIES_PER_COUNTRY
    cities += rng.integers(0, CITIES_PER_COUNTRY, n_persons)
    tables["person_isLocatedIn_place"] = _edge("Person", "Place", persons, cities)
    tables["person_knows_person"] = _knows(rng, n_persons, seed)
    tables.update(_messages(rng, "post", n_persons * 100, n_persons, n_tags))
    tables.update(_messages(rng, "comment", n_persons * 200, n_persons, n_tags))
    tables.update(_replies(rng, n_persons * 100, n_persons * 200))
    return tables


def write_csv_dir(tables: dict[str, pa.Table], root: str | Path) -> Path:
    """Write `tables` as `root/{static,dynamic}/<stem>_0_0.csv`, `|`-separated with headers."""
    root = Path(root)
    for stem, table in tables.items():
        folder = root / ("static" if stem in STATIC else "dynamic")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stem}_0_0.csv"
        path.write_text("|".join(table.column_names) + "\n", encoding="utf-8")
        options = csv.WriteOptions(include_header=False, delimiter="|", quoting_style="none")
        with path.open("ab") as out:
            csv.write_csv(table, out, write_options=options)
    return root


def _zipf(rng: np.random.Generator, n: int, size: int, exponent: float = 1.2) -> np.ndarray:
    """`size` draws from [0, n) with P(i) ~ (i + 1) ** -exponent."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    return rng.choice(n, size=size, p=weights / weights.sum()).astype(np.int64)


def _pick(rng: np.random.Generator, words: list[str], size: int) -> pa.Array:
    return pa.array(np.array(words, dtype=object)[_zipf(rng, len(words), size)], pa.string())


def _label(prefix: str, ids: np.ndarray) -> pa.Array:
    """`<prefix>_<id>` for every id."""
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(ids), pa.string()), "_")


def _ip(rng: np.random.Generator, size: int) -> pa.Array:
    octets = [pc.cast(pa.array(rng.integers(1, 255, size)), pa.string()) for _ in range(4)]
    return pc.binary_join_element_wise(*octets, ".")


def _persons(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    n = ids.size
    birthday = START_MS - rng.integers(18 * 365, 60 * 365, n) * DAY_MS
    return pa.table(
        {
            "id": ids,
            "firstName": _pick(rng, FIRST.split(), n),
            "lastName": _pick(rng, LAST.split(), n),
            "gender": pa.array(np.where(rng.random(n) < 0.5, "female", "male"), pa.string()),
            "birthday": birthday,
            "creationDate": START_MS + rng.integers(0, SPAN_MS // 4, n),
            "locationIP": _ip(rng, n),
            "browserUsed": _pick(rng, BROWSERS, n),
        }
    )


def _tagclasses(rng: np.random.Generator, tags: np.ndarray) -> dict[str, pa.Table]:
    """71 tag classes in a tree (class i is a subclass of class i // 2); every tag has
    one class, drawn from a power law."""
    classes = np.arange(N_TAGCLASSES, dtype=np.int64)
    return {
        "tagclass": pa.table({"id": classes, "name": _label("TagClass", classes)}),
        "tag_hasType_tagclass": _edge("Tag", "TagClass", tags, _zipf(rng, N_TAGCLASSES, tags.size)),
        "tagclass_isSubclassOf_tagclass": _edge("TagClass", "TagClass", classes[1:],
                                                classes[1:] // 2),
    }  # fmt: skip


def _places() -> dict[str, pa.Table]:
    countries = np.arange(N_COUNTRIES, dtype=np.int64)
    cities = np.arange(N_COUNTRIES, N_COUNTRIES * (CITIES_PER_COUNTRY + 1), dtype=np.int64)
    ids = np.concatenate([countries, cities])
    kind = np.where(ids < N_COUNTRIES, "country", "city")
    place = pa.table(
        {
            "id": ids,
            "name": _label("Place", ids),
            "type": pa.array(kind, pa.string()),
        }
    )
    country_of = (cities - N_COUNTRIES) // CITIES_PER_COUNTRY
    return {"place": place, "place_isPartOf_place": _edge("Place", "Place", cities, country_of)}


def _edge(a: str, b: str, src: np.ndarray, dst: np.ndarray, **extra: np.ndarray) -> pa.Table:
    arrays = [pa.array(src), pa.array(dst), *(pa.array(v) for v in extra.values())]
    return pa.Table.from_arrays(arrays, names=[f"{a}.id", f"{b}.id", *extra])


def _knows(rng: np.random.Generator, n_persons: int, seed: int) -> pa.Table:
    capacity = n_persons * (n_persons - 1) // 4
    src, dst = power_law_graph(min(18 * n_persons, capacity), n_persons, seed=seed, directed=False)
    dates = START_MS + rng.integers(SPAN_MS // 4, SPAN_MS // 2, src.size)
    return _edge("Person", "Person", src, dst, creationDate=dates)


def _messages(
    rng: np.random.Generator, kind: str, n: int, n_persons: int, n_tags: int
) -> dict[str, pa.Table]:
    """`kind` entities (posts or comments), their creators, tags and places."""
    base = POST_BASE if kind == "post" else COMMENT_BASE
    ids = base + np.arange(n, dtype=np.int64)
    text = _pick(rng, WORDS, n)
    columns: dict[str, pa.Array | np.ndarray] = {
        "id": ids,
        "creationDate": START_MS + SPAN_MS // 2 + rng.integers(0, SPAN_MS // 2, n),
        "locationIP": _ip(rng, n),
        "browserUsed": _pick(rng, BROWSERS, n),
    }
    if kind == "post":  # a third are photos: an image file and no content
        photo = pa.array(rng.random(n) < 1 / 3)
        image = pc.binary_join_element_wise(
            "photo", pc.cast(pa.array(ids), pa.string()), ".jpg", ""
        )
        columns["imageFile"] = pc.if_else(photo, image, "")
        columns["content"] = pc.if_else(photo, "", text)
    else:
        columns["content"] = text
    columns["length"] = pc.utf8_length(columns["content"])
    entity = pa.table(columns)
    creators = _zipf(rng, n_persons, n, exponent=0.8)
    tagged = rng.random(n) < 0.7
    tag_of = _zipf(rng, n_tags, int(tagged.sum()), exponent=1.0)
    places = _zipf(rng, N_COUNTRIES, n)
    name = kind.capitalize()
    return {
        kind: entity,
        f"{kind}_hasCreator_person": _edge(name, "Person", ids, creators),
        f"{kind}_hasTag_tag": _edge(name, "Tag", ids[tagged], tag_of),
        f"{kind}_isLocatedIn_place": _edge(name, "Place", ids, places),
    }


def _replies(rng: np.random.Generator, n_posts: int, n_comments: int) -> dict[str, pa.Table]:
    """Half the comments reply to a post, the others to an earlier comment (a forest)."""
    ids = np.arange(n_comments, dtype=np.int64)
    to_post = (rng.random(n_comments) < 0.5) | (ids == 0)
    posts = POST_BASE + rng.integers(0, n_posts, int(to_post.sum()))
    later = ids[~to_post]
    parents = (rng.random(later.size) * later).astype(np.int64)
    return {
        "comment_replyOf_post": _edge("Comment", "Post", COMMENT_BASE + ids[to_post], posts),
        "comment_replyOf_comment": _edge(
            "Comment", "Comment", COMMENT_BASE + later, COMMENT_BASE + parents
        ),
    }
