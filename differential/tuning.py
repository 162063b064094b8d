"""Every threshold that picks a tactic or sizes a part, in one value (ADR 0049).

Layer: differential (bottom). Imports the standard library only.

The operators own their algorithms once; where an algorithm has two tactics (Python
lists for a few rows, numpy columns for many; a fused round or a scheduled one; a
binary search or a hash index), or runs in parts (a sort, a join's product, a
reduce's history), the choice and the part sizes are read from `TUNING`, the one
`Tuning` in force. None of them changes a result, only how it is computed: that is
why one value per process is enough, and why tests may run every preset against
the default and expect the same answers.

Tests and benchmarks choose a preset with `tuned(...)` (a context manager; it
restores the previous tuning on exit):

    with tuned(Tuning.columns_only()):      # numpy kernels at every size
        ...
    with tuned(Tuning.default().but(sort_part=3)):  # one threshold moved
        ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal


@dataclass
class Tuning:
    """The thresholds of every tactic choice and part size, with their owners."""

    # -- rows or columns (ADR 0012) ---------------------------------------------------
    # Rows at or below which consolidation and hashing run on Python lists
    # (`differential.small`), and a trace's few waiting rows stay unarranged.
    few: int = 32
    # Matches of a few changes beyond which numpy joins them (`operators.join`), and
    # entries a few-change lookup may gather before a delta query goes to numpy.
    few_pairs: int = 256
    # A reduce step whose history has at most `few * reduce_list_factor` entries runs
    # on lists (`operators.reduce`).
    reduce_list_factor: int = 8
    # Rows that may wait unarranged in a trace (`trace.spine`, integer columns only).
    recent_rows: int = 256
    # Batches of at most this many entries are searched as a Python list of their
    # hashes when a few keys are looked up (`trace.cursor`): `bisect` costs a
    # fraction of a microsecond, a `searchsorted` call about two.
    listed: int = 1024
    # Matched entries beyond which a few keys' ranges are expanded with numpy.
    expanded: int = 256
    # Fewer query keys than this are binary-searched even in an indexed batch.
    few_keys: int = 64
    # Few-key lookups read a large batch (up to `listed_max` entries) as Python lists
    # once asked `rows / listed_cost` times (`trace.index`).
    listed_max: int = 1 << 16
    listed_cost: int = 32

    # -- indexes and sieves -------------------------------------------------------------
    # A batch is indexed once asked about `asked_per_entry` query keys per entry, and a
    # batch of fewer than `min_indexed` entries as if it had that many (`trace.index`):
    # the build's fixed cost (about 0.2 ms) is what the floor repays.
    min_indexed: int = 1 << 14
    asked_per_entry: float = 1 / 8
    # Slots per key at most in a hash index: linear probing stays short below 1/3 full.
    index_load: int = 3
    # ... and in a growing distinct's key set (`trace.keyset`), which holds every key of
    # its output for the whole run: half full at most (a key set of CSPA's 322k keys
    # took 34 MiB at 1/3; ADR 0067).
    keyset_load: float = 2
    # Query keys an index probes at once.
    index_chunk: int = 1 << 18
    # A probe of a hash table (`trace.index`) goes on one row at a time in Python once at
    # most this many rows are left colliding: each vectorized step costs about ten
    # numpy calls, and the last few rows of a probe take several (ADR 0077). 0: every
    # step vectorized (the reference).
    probe_tail: int = 32
    # A lookup of this many keys or more, in a trace of `sifted_batches` batches or
    # more, asks the trace's sieve first (`trace.sift`); its size per key and floor.
    sifted_keys: int = 1 << 12
    sifted_batches: int = 3
    sieve_bits_per_key: int = 16
    sieve_min_bits: int = 1 << 20
    # A dense pair table (`trace.dense`): bytes per entry it may spend, and at most.
    dense_bytes_per_entry: int = 128
    dense_max_bytes: int = 1 << 25
    # A key set whose keys have so far all been hashed to their integer columns packed
    # side by side stores that one int64 per key, not the columns, until a key that does
    # not pack arrives (`trace.keyset`, ADR 0078); False: the columns (the reference).
    packed_keys: bool = True

    # -- spines (`trace.spine`) -----------------------------------------------------------
    # Appended batches that may wait unmerged for a reader.
    lazy_batches: int = 32
    # A trace of at most `small_trace` entries holds at most `small_batches` batches
    # and merges them all at once (a merge's fixed cost is about 100 us).
    small_trace: int = 256
    small_batches: int = 4
    # In a larger trace, batches of at most `tail` entries wait at the end, at most
    # `small_batches` of them, and then merge all at once.
    tail: int = 64
    # A merge of more entries than `merge_fuel` is spread over the spine's next
    # maintenances (ADR 0054): each merges at least `merge_fuel` more entries of every
    # merge in progress, and `merge_effort` entries per entry appended since the last
    # (so a merge finishes before its batch is due in a larger one). 0: every merge
    # at once, when decided.
    merge_fuel: int = 1 << 13
    merge_effort: int = 4
    # A fueled merge of batches that lookups indexed builds the merged batch's index the
    # same way, before the batch replaces its inputs (`trace.fuel`, ADR 0069); False: its
    # first lookups build it at once, on one commit (the reference). Off: measured on the
    # streamed triangle count, it held merges' inputs longer and raised the p50.
    merge_index: bool = False
    # A trace that outgrows its last compaction (ADR 0040) compacts by a fueled merge of
    # all its batches when it holds more than `merge_fuel` updates (`trace.spine`, ADR
    # 0069); False: by one merge, on the commit that found it overgrown (the reference).
    # Off by default, as `merge_index`.
    fueled_compaction: bool = False
    # A trace's sieve half full starts its successor, filled `merge_effort` hashes per
    # entry appended, which replaces it once it is full (`trace.sift`, ADR 0080); False:
    # a full sieve is rebuilt whole, at twice the size, when next asked (the reference).
    spread_sieve: bool = True
    # A batch's hash index of more than `merge_fuel` runs, once worth building, is built
    # by the lookups that follow, `index_effort` runs per key asked (`trace.index`, ADR
    # 0080); False: at once, by the lookup that made it worth building (the reference).
    # 8: done after as many keys again as made it worth building; 2 halved the largest
    # build in one round of the 5M-edge stream (docs/benchmarks.md, ADR 0080).
    spread_index: bool = True
    index_effort: float = 8.0
    # An arrangement nobody reads concatenates its updates every `deferred` times and
    # arranges them once they outgrow `deferred_rows` and the trace (`operators.arrange`).
    deferred: int = 32
    deferred_rows: int = 4096

    # -- sorted input, uniform columns (ADR 0044) -------------------------------------------
    # Rows from which a sort first checks whether its input is in order already.
    sorted_from: int = 1 << 12
    # Rows `in_order` checks at once.
    probe: int = 1 << 16
    # Rows from which one repeated time is held as one value (`time.uniform_times`).
    uniform_from: int = 1 << 10
    # Consolidation and batch builds of integer rows whose diffs differ pack the diffs
    # below the rows and sort the packed values (`batch.consolidate_packed`, ADR 0057);
    # False: they sort a permutation and gather every column (the reference).
    packed_diffs: bool = True
    # Arrangements of a one-shot dataflow's totally ordered scopes (`Scope.totally_ordered`)
    # advance the history they settle to the latest time and consolidate it, in the new
    # batch and in the trace's merges (`operators.arrange`, ADR 0062); False: every
    # round's updates stay apart, as in a live dataflow (the reference).
    compact_rounds: bool = True
    # ... until one settle consolidates away less than this share of the rows it
    # arranged: then sorting them does not pay (each row is derived about once).
    compact_gain: float = 0.1
    # ... and then, no longer consolidating what it settles, the trace's `since` still
    # advances to the latest time settled: its merges keep one time, not a time column
    # per row (`operators.arrange`, ADR 0078); False: `since` stays where the last
    # consolidating settle left it (the reference).
    advance_unsorted: bool = True
    # Merges of identity-keyed batches, and arrangements of a time's updates that came in
    # parts, pack each part's integer rows in place (its times advanced on their own)
    # instead of concatenating the parts and building (`trace.batch.build_parts`, ADR
    # 0063); False: concatenate and build (the reference).
    packed_parts: bool = True
    # The growing least-value step reads each key's current least from a table of the
    # output it keeps while every output change is its own (`operators.reduce_extreme`,
    # ADR 0063); False: it reads the output trace (the reference).
    least_held: bool = True
    # The growing least-value step reads a round's arranged changes (one integer key,
    # sorted and consolidated) by their runs: each key's first insertion and first
    # retraction found by binary search among the rows of each sign, no per-row group
    # index (`operators.reduce_extreme`, ADR 0068); False: per-key reductions over
    # every row and a search for the winning rows (the reference).
    least_runs: bool = True
    # A growing distinct of a totally ordered scope counts its input's rows per key in its
    # key set, and the input's arrangement keeps none of them until its trace is read
    # (`operators.counted`, ADR 0067); False: the arrangement settles them (the reference).
    counted_inputs: bool = True
    # Merges of batches holding keys only (a set input's presence arrangement), one time
    # coordinate, oldest first: one stable sort of their hashes, consolidating only where
    # hashes tie (`trace.runs`, ADR 0075); False: `Batch.build` of the concatenation
    # (the reference).
    key_runs: bool = True
    # A bulk insert into a set input whose rows have ordered hashes, of at least this
    # many rows per entry the input holds, finds the rows it holds already by one stable
    # sort of the input's hashes and theirs, which the seal's merge reuses, looking up
    # only the rows whose hash it holds (`inputs.Input.absent`, ADR 0075): a sort costs
    # the whole state, a lookup each asked row. inf: every asked row is looked up (the
    # reference).
    merged_dedupe: float = 0.5
    # An integer column inserted narrower than its relation's type (an int32 column of
    # `number`s, as the Parquet reader makes them) stays at its width through the
    # transaction, and a bulk load of a set packs its hashes from it; its rows are
    # unpacked at the relation's type (`Requests.given`, `Input._inserted`, ADR 0073).
    # False: the transaction widens it first (the reference).
    narrow_columns: bool = True
    # A growing distinct whose step's changes hold retractions takes its growing step when
    # they cancel (consolidated, every row inserted: an antijoin's `x - x ⋉ y` inside a
    # recursion, or a negated lower stratum entering it), not the general reduce
    # (`operators.reduce_growing`, ADR 0077); False: the general reduce (the reference).
    growing_net: bool = True
    # An arrangement of a one-shot dataflow's rounds whose every reader is a join with a
    # side no variable reaches (a lower stratum's relation) keeps no round's updates: no
    # reader looks them up after the first round (`operators.unread`, ADR 0077); False:
    # it keeps them (the reference).
    unread_sides: bool = True
    # A join whose two sides both change at a step meets the larger side's changes with
    # the other's history and changes, and the smaller side's with the larger's history
    # before them, so that only the smaller change is arranged for lookups
    # (`operators.join`, ADR 0077); False: the left side's changes meet the right's
    # (the reference).
    smaller_arranged: bool = True
    # A one-shot dataflow forgets an iteration scope's operators, and what they hold, as
    # soon as the scope has run (`operators.iterate`, ADR 0077), not when the whole
    # dataflow is dropped (ADR 0062); False: at the end (the reference).
    retire_rounds: bool = True
    # An antijoin's step sends its changed rows each times one less the multiplicity the
    # negated side holds under its key, when every such entry is at a time `<=` the step's
    # (`operators.antijoin`, ADR 0077); False: the rows and their join's pairs negated
    # (the reference).
    antijoin_masks: bool = True
    # A distinct counting its input (`counted_inputs`) counts the rows of keys it holds
    # as they arrive, when they are insertions at the time being processed and it alone
    # reads the arrangement: a round's candidates never wait whole (`CountedInput.arrive`,
    # ADR 0072); False: they are counted once the distinct has admitted their time's
    # rows (the reference).
    counted_arrivals: bool = True
    # ... a part at a time, where a sample of its rows finds at least this share of keys
    # known: most rows of a closure's round are new keys, which would only be probed
    # twice and copied to wait (CSPA's are mostly known: they are counted and dropped).
    arrival_share: float = 0.5
    # A delta query gathers, at each stage, only the variables its later stages, checks
    # and output read, and outputs only those the rule's head keeps when nothing follows
    # it in the body (`joins.pipeline.narrowed`, ADR 0078); False: every variable bound
    # so far, all of its atoms' variables out (the reference).
    narrow_prefixes: bool = True

    # -- parts, so that a budget or an interrupt acts between two (ADR 0039) -----------------
    # Rows one argsort handles at most (about a tenth of a second).
    sort_part: int = 1 << 21
    # Rows one value sort of int64 handles at most.
    value_sort_part: int = 1 << 24
    # Pairs a join builds at once (a larger product is chunked by changes): each pair
    # costs about 70 bytes while its chunk is built (lookups, gathers, times, diffs),
    # so a chunk of 2^20 was 70 MiB of a 1M-edge reach's peak (ADR 0062).
    pairs: int = 1 << 18
    # History entries a reduce step handles at once (a larger step goes by runs of keys).
    history: int = 1 << 21
    # Candidates a delta query proposes and validates at once, and prefixes it extends at
    # once when their proposal counts are unknown (`joins.delta_query`).
    proposals: int = 1 << 20
    prefixes: int = 1 << 16

    # -- estimates --------------------------------------------------------------------------
    # Changes whose matches a join counts to estimate a product's size.
    join_sample: int = 256
    # Changes a delta query samples to estimate a pipeline's cost.
    pipeline_sample: int = 512

    # -- fused rounds (ADR 0029, 0034) ----------------------------------------------------------
    # New (first epoch) or changed (later epochs) keys at which a fused chain hands the
    # rounds so far to the scheduled operators.
    handover: int = 4096
    later_handover: int = 4096
    # Keys a first-epoch fused run remembers as Python rows (ADR 0061): while the run's
    # set holds every key of the distinct's key set (it started with at most `few`),
    # a round's membership test is that set alone, not a probe of the key set.
    fused_seen: int = 1 << 21

    # -- adaptive commits (ADR 0053, ADR 0064, `datalog.db.adaptive`) ---------------------------
    # A commit that asks to change at least `recompute_min_rows` rows in the inputs of a
    # live dataflow is weighed: it recomputes the dataflow from the new base when its
    # measured model predicts that cheaper than running the change through ("measured";
    # "always" and "never" are the tests' and benches' twins). Until the dataflow has
    # been measured, the prior recomputes at `recompute_ratio` times the base.
    recompute: Literal["measured", "always", "never"] = "measured"
    recompute_ratio: float = 0.005
    recompute_min_rows: int = 100
    # The weight of a dataflow's older measurements at each new one, and how far past
    # its largest measured run a run is predicted by the fitted line alone.
    recompute_decay: float = 0.7
    recompute_reach: float = 4.0
    # A watched why-not follows the derived relations it read with dataflows of its own
    # and checks each epoch against their changes (ADR 0071); False: it reads them
    # again at each epoch that writes a relation the fact depends on (the twin).
    why_follow: bool = True
    # A planner remembers the magic-set specializations it made for its program, by
    # query (`datalog.plan.magic.Specializations`): a query asked again is not
    # rewritten and checked again. False: every plan specializes anew (the twin).
    memo_specializations: bool = True

    # -- dataflows ----------------------------------------------------------------------------
    # Nested sends of stateless operators after which updates wait for the outermost
    # send (`dataflow.Stream.send`): a chain of thousands of maps stays off the stack.
    relay_depth: int = 64

    # -- fact files (ADR 0067, `datalog.io.sources`) ------------------------------------------
    # Fact files of at most this many bytes are read by Python's own text handling
    # (`datalog.eval.facts_text`), and symbol columns of at most `python_symbols` rows
    # are interned by a Python loop (`datalog.eval.rows`): neither loads pyarrow, about
    # 30 MiB and 50 ms a process, more than a small program's whole evaluation. Larger
    # ones go to pyarrow's CSV reader and Arrow's hashing. 0: always pyarrow (the
    # reference).
    text_facts: int = 1 << 20
    python_symbols: int = 1 << 16
    # Fact files of integer columns only, of at most `integer_facts` bytes, are checked
    # by numpy `text_part` bytes at a time and parsed by `numpy.loadtxt`
    # (`datalog.eval.facts_integers`): as fast as pyarrow's reader on one core, without
    # its import or parse buffers. Larger ones go to pyarrow (it parses on every core).
    integer_facts: int = 1 << 26
    text_part: int = 1 << 19

    # -- a growing distinct's key sets (ADR 0082) ---------------------------------------
    # A key set's table holds positions only and reads each slot's hash from the
    # store (`trace.table.PositionTable`: 4 bytes a slot, not 12; keys of mixed hashes
    # keep an int64 hash each beside their columns). False: `HashTable` (the reference).
    keyset_positions: bool = True
    # A key set counts its input (ADR 0067) in int32 while every count fits (widened to
    # int64 before one could overflow). False: int64 from the start (the reference).
    narrow_counts: bool = True
    # Keys a new key set's first table has room for (tests start smaller, to grow often).
    keyset_start: int = 1 << 10

    # -- the process floor (ADR 0084) ---------------------------------------------------
    # A fact file of integer columns only goes to numpy (`facts_integers`) even when it
    # is small enough for Python's text handling, which held every line and field as a
    # Python string (CSPA's 250 KB file: 8 MiB at once); False: Python's reader first.
    integers_by_numpy: bool = True

    # -- arranged batches (ADR 0083, `differential.trace.batch`) -------------------------------
    # A batch of at least `packed_batches_from` entries whose two or more int64 key columns
    # all pack into its key hashes holds the hashes only and reads its keys back from them
    # (`Batch.keys`, `keys_at`): one int64 a key, not three. False: it holds both (the
    # reference).
    packed_batches: bool = True
    packed_batches_from: int = 4096

    # -- value columns at the width they need (ADR 0085, `differential.trace.narrow`) ---
    # A batch of at least `narrow_values_from` entries in a nested scope holds each int64
    # value column whose values all fit int32 at int32 and reads it back at int64
    # (`Batch.values`, `columns`, `columns_at`, `values_at`); merges keep it narrow.
    # False: every value column at its type (the reference).
    narrow_values: bool = True
    narrow_values_from: int = 4096

    # -- a delta query's step (ADR 0086) ----------------------------------------------------
    # A delta query's extenders look up with each batch's found times joined with the
    # step's time, at or before every prefix's (`Arranged.lookup_joined`): entries of
    # batches at or before it are found at it, one repeated time (and one diff where a
    # part's agree), so a lookup across batches of several rounds holds no time a row,
    # nor does the join of its candidates' times (`joins.columns`); a source's changes
    # are one time and diff at any size. False: the found times as stored, joined with
    # the prefixes' when the candidates extend them (the reference).
    joined_lookups: bool = True
    # The same for a binary join's changes (all at the step's time) and the other side's
    # entries they meet (`operators.join`). False: the found times as stored (the reference).
    joined_pairs: bool = True

    @classmethod
    def default(cls) -> Tuning:
        """The tuning measured on the benchmarks (the ADRs cited per field)."""
        return cls()

    @classmethod
    def columns_only(cls) -> Tuning:
        """Numpy kernels at every size: no Python-list tactic, no waiting rows."""
        return cls(few=0, few_pairs=0, recent_rows=0, listed=0, listed_max=0, few_keys=0)

    @classmethod
    def rows_first(cls) -> Tuning:
        """The Python-list tactics up to ten times further than measured best."""
        return cls(few=320, few_pairs=2560, listed=10240, expanded=2560, few_keys=640)

    @classmethod
    def small_parts(cls) -> Tuning:
        """Every part a few rows: each split path (sorts, products, histories,
        proposals, sorted-input checks) runs at sizes a test can afford."""
        return cls(
            sort_part=3,
            value_sort_part=3,
            pairs=2,
            history=2,
            proposals=2,
            prefixes=2,
            probe=2,
            index_chunk=2,
        )

    def but(self, **changes: object) -> Tuning:
        """This tuning with the named thresholds changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


TUNING = Tuning()  # the tuning in force: modules read its fields when they decide


@contextmanager
def tuned(tuning: Tuning) -> Iterator[Tuning]:
    """Within the block, `tuning` is in force (for the whole process: tactics change
    no result, so no thread or database sees a different answer)."""
    saved = dataclasses.replace(TUNING)
    _assign(tuning)
    try:
        yield TUNING
    finally:
        _assign(saved)


def _assign(tuning: Tuning) -> None:
    for field in dataclasses.fields(Tuning):
        setattr(TUNING, field.name, getattr(tuning, field.name))
