"""Base relations: input semantics turning requested changes into diffs.

Layer: differential. Imports numpy and the trace/arrangement modules.

A transaction asks to insert and retract rows, in order. The input's semantics
decide the diffs it commits:

- `set`: a row is in or out. The last request on a row decides; inserting a
  present row or retracting an absent one is a no-op (never a negative count).
- `multiset`: every request is a raw diff (+1 or -1).
- `last_write_wins` (binary rows `(entity, value)`): an entity has at most one
  value; inserting a new value retracts the old one; retracting a value the
  entity does not hold is a no-op.

All of it runs on whole columns: requests are sorted by (row, sequence) and
the current state is looked up in the input's presence arrangement.

The presence arrangement also keeps the input's history: a handle (`kept`)
holds its compaction back to the oldest epoch the engine keeps readable, so
`state_as_of(E)` is exact for every epoch from there on. Dataflows read the
other arrangements, which compact to the current epoch and never hold history.
An internal input (`history=False`: a view's contents, a parameter relation)
keeps none: nothing reads it as of a past epoch, so its presence arrangement
compacts to the current epoch like the others (ADR 0040).

An input knows its `size`, the number of distinct rows it holds (a set's size,
whatever the semantics), the staged epoch included, kept by each epoch's diffs.
A `late` input's changes for an epoch are computed from what the other dataflows
did in that epoch (see `Engine.commit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from differential.batch import (
    Column,
    Updates,
    consolidate,
    distinct_rows,
    in_order,
    integral,
    run_starts,
    sort_order,
    sorted_values,
    uniform_diffs,
)
from differential.operators.shared import SharedArrangement
from differential.time import Antichain, column, uniform_times
from differential.trace.batch import (
    Batch,
    Description,
    Hashes,
    key_hash,
    ordered_hash,
    rows_of_hashes,
)
from differential.trace.cursor import FewKeys, columns_of
from differential.trace.footprint import Footprint
from differential.trace.runs import Known
from differential.tuning import TUNING

Semantics = Literal["set", "multiset", "last_write_wins"]


class Requests:
    """Requested changes in order: `inserting[i]` is True for an insert, False for a retract.

    `columns` are of the relation's types (`dtypes`, when given). An integer column
    given narrower than its type (an int32 column of int64 values, `Tuning.narrow_columns`)
    is held as given (`given`) and widened the first time `columns` is read: a bulk
    load of sets hashes and sorts the narrow columns themselves (`Input._inserted`,
    ADR 0073), and never reads `columns`."""

    __slots__ = ("_columns", "dtypes", "given", "inserting")

    def __init__(
        self,
        columns: Sequence[Column],
        inserting: npt.NDArray[np.bool_],
        dtypes: Sequence[np.dtype] | None = None,
    ) -> None:
        self.given = tuple(columns)
        self.inserting = inserting
        self.dtypes = None if dtypes is None else tuple(np.dtype(d) for d in dtypes)
        narrow = self.dtypes is not None and any(
            c.dtype != d for c, d in zip(self.given, self.dtypes, strict=True)
        )
        self._columns: tuple[Column, ...] | None = None if narrow else self.given

    @property
    def columns(self) -> tuple[Column, ...]:
        """The columns at the relation's types (narrow ones widened, once)."""
        if self._columns is None:
            assert self.dtypes is not None
            self._columns = tuple(
                c if c.dtype == d else c.astype(d)
                for c, d in zip(self.given, self.dtypes, strict=True)
            )
        return self._columns

    def __len__(self) -> int:
        return len(self.inserting)


class Input:
    """A base relation: its semantics and its arrangements, shared by all dataflows."""

    def __init__(
        self,
        name: str,
        dtypes: Sequence[np.dtype],
        semantics: Semantics = "set",
        late: bool = False,
        history: bool = True,
    ) -> None:
        if semantics == "last_write_wins" and len(dtypes) != 2:
            raise ValueError("last_write_wins needs a binary relation (entity, value)")
        self.name = name
        self.dtypes = tuple(np.dtype(d) for d in dtypes)
        self.semantics = semantics
        self.late = late
        self._sealed_size = 0  # distinct rows held, as of the last sealed epoch
        # The presence key hashes of the diffs `_inserted` computed last, for `stage`, and
        # the sort that found them new, for the seal's merge (`trace.runs.Known`).
        self._hashed: tuple[Updates, Hashes, Known | None] | None = None
        self._staged_size = 0  # how the staged epoch changes it
        key_arity = 1 if semantics == "last_write_wins" else len(self.dtypes)
        self.presence = SharedArrangement(key_arity, self.dtypes, f"{name}/state")
        # Holds the presence trace's compaction back to the oldest readable epoch
        # (None: the input keeps no history).
        self.kept = self.presence.spine.handle(Antichain([(0,)])) if history else None
        # arrangements by column permutation and key arity, shared by dataflows
        self.arrangements: dict[tuple[tuple[int, ...], int], SharedArrangement] = {}

    @property
    def arity(self) -> int:
        return len(self.dtypes)

    @property
    def size(self) -> int:
        """Distinct rows held (a set's size), the staged epoch's changes included."""
        return self._sealed_size + self._staged_size

    def stats(self) -> dict[str, object]:
        """Distinct tuples, updates held, and each shared arrangement's size and readers."""
        return {
            "tuples": self.size,
            "updates": len(self.presence),
            "arrangements": {
                a.name: {"tuples": a.held()[0], "batches": a.held()[1], "readers": a.readers}
                for a in self.arrangements.values()
            },
        }

    def diffs(self, requests: Requests, epoch: int) -> Updates:
        """The diffs that `requests` commit at `epoch`, given the current state."""
        if len(requests) == 0:
            return Updates.empty(self.arity, 1, self.dtypes)
        if self.semantics == "multiset":
            return self._multiset_diffs(requests, epoch)
        if self.semantics == "set":
            return self._set_diffs(requests, epoch)
        return self._lww_diffs(requests, epoch)

    def _present_counts(
        self, keys: Sequence[Column], hashes: Hashes | None = None, ordered: bool = False
    ) -> npt.NDArray[np.int64]:
        """Accumulated multiplicity of each row of `keys` (all columns) in the state
        (`hashes`: their key hashes, if known; `ordered`: they ascend)."""
        spine = self.presence.spine
        owner, found = spine.lookup(keys, hashes, rare=True, ordered=ordered)  # new, mostly
        counts = np.zeros(len(keys[0]), dtype=np.int64)
        same = np.ones(len(owner), dtype=bool)
        for mine, theirs in zip(found.columns, keys, strict=True):
            same &= mine == theirs[owner]
        np.add.at(counts, owner[same], found.diffs[same])
        return counts

    def _set_diffs(self, requests: Requests, epoch: int) -> Updates:
        if len(requests) <= TUNING.few and integral(requests.columns):
            return self._set_diffs_few(requests, epoch)
        if requests.inserting.all():
            return self._inserted(requests, epoch)
        return self._set_diffs_sorted(requests, epoch)

    def _set_diffs_sorted(self, requests: Requests, epoch: int) -> Updates:
        """`_set_diffs` of any requests: sorted by (row, sequence), the last decides."""
        order = sort_order(requests.columns, stable=True)  # sequence order within a row
        cols = tuple(c[order] for c in requests.columns)
        last = np.flatnonzero(np.roll(run_starts(cols), -1))
        rows = tuple(c[last] for c in cols)
        wanted = requests.inserting[order][last].astype(np.int64)
        present = (self._present_counts(rows) > 0).astype(np.int64)
        change = wanted - present
        keep = change != 0
        return Updates(
            tuple(c[keep] for c in rows), column((epoch,), int(keep.sum())), change[keep]
        )

    def _inserted(self, requests: Requests, epoch: int) -> Updates:
        """`_set_diffs` of inserts only (a bulk load): the distinct rows not present,
        each +1, sorted. Into an empty input nothing is looked up, and the batches
        built from them find their rows in order (ADR 0044).

        When the presence arrangement's key hash orders rows like the rows themselves
        (`ordered_hash`: integers that fit), the hashes are sorted as values and the
        rows unpacked from them, and `stage` builds the presence batch on those same
        hashes; otherwise `distinct_rows` sorts packed rows. Rows that come sorted are
        not sorted again. Narrow integer columns (`Requests.given`) are hashed as they
        are (`Tuning.narrow_columns`; the twin widens them first): the rows unpacked from
        the hashes are of the relation's types either way."""
        hashes = None
        if self.presence.key_arity == self.arity:
            hashes = ordered_hash(requests.given if TUNING.narrow_columns else requests.columns)
        if hashes is None:
            rows = distinct_rows(requests.columns)
        else:
            if not in_order([hashes]):
                hashes = sorted_values(hashes)
            first = run_starts([hashes])
            if not first.all():
                hashes = hashes[first]
            rows = rows_of_hashes(hashes, self.dtypes)
        known = None
        if len(self.presence):
            if hashes is not None and self._sorts(len(hashes)):
                absent, known = self._sorted_absent(rows, hashes)
            else:
                absent = self.absent(rows, hashes)
            if not absent.all():
                rows = tuple(c[absent] for c in rows)
                hashes = None if hashes is None else hashes[absent]
        n = len(rows[0])
        diffs = Updates(rows, uniform_times((epoch,), n), uniform_diffs(1, n))
        self._hashed = None if hashes is None else (diffs, hashes, known)
        return diffs

    def absent(self, rows: tuple[Column, ...], hashes: Hashes | None) -> npt.NDArray[np.bool_]:
        """Which of the distinct `rows` the input does not hold (`hashes`: their ordered
        hashes, ascending, if they have them).

        With ordered hashes, when they are many next to the state's entries, the
        state's hashes and theirs are sorted together, once (`Tuning.merged_dedupe`,
        ADR 0075): the stable sort puts each asked row right
        after the state's entries of the same hash, and only the rows that land there
        are looked up (a hash the state holds may still be another row's, or a row
        retracted since). Else, or as the reference, every row is looked up."""
        if hashes is None or not self._sorts(len(hashes)):
            return self._present_counts(rows, hashes, ordered=hashes is not None) <= 0
        return self._sorted_absent(rows, hashes)[0]

    def _sorts(self, asked: int) -> bool:
        """Whether `asked` rows are enough next to the state to sort it with them."""
        return asked >= TUNING.merged_dedupe * len(self.presence.spine)

    def _sorted_absent(
        self, rows: tuple[Column, ...], hashes: Hashes
    ) -> tuple[npt.NDArray[np.bool_], Known]:
        """`absent` by one sort, and the sort, which the seal's merge of the new rows
        into the state reuses (`trace.runs.Known`)."""
        batches = tuple(self.presence.spine.batches)
        held = sum(len(b) for b in batches)
        joined = np.concatenate([*(b.hashes for b in batches), hashes])
        order = np.argsort(joined, kind="stable")  # the sorted runs merged: about linear
        ordered = joined[order]
        at = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1  # entries after their hash
        at = at[order[at] >= held]  # asked rows whose hash the state holds
        absent = np.ones(len(hashes), dtype=bool)
        if len(at):
            maybe = order[at] - held
            found = tuple(c[maybe] for c in rows)
            absent[maybe] = self._present_counts(found, hashes[maybe], ordered=True) <= 0
            at = at[~absent[maybe]]  # asked rows held: not in the staged batch
        return absent, Known(batches, order, ordered, len(hashes), at)

    def _set_diffs_few(self, requests: Requests, epoch: int) -> Updates:
        """`_set_diffs` for a few requests, row by row in Python (the same diffs)."""
        last: dict[tuple[object, ...], bool] = {}
        asked = zip(*(c.tolist() for c in requests.columns), strict=True)
        for row, inserting in zip(asked, requests.inserting.tolist(), strict=True):
            last[row] = inserting  # the last request on a row decides
        rows = sorted(last)
        columns = columns_of(rows, self.dtypes)
        hashes = key_hash(columns)
        present = [0] * len(rows)
        wanted = FewKeys(rows, hashes.tolist(), columns, hashes)
        for owner, _, _, diff in self.presence.spine.lookup_entries(wanted):
            present[owner] += diff
        changes = [int(last[row]) - (count > 0) for row, count in zip(rows, present, strict=True)]
        kept = [i for i, change in enumerate(changes) if change]
        return Updates(
            tuple(columns_of([rows[i] for i in kept], self.dtypes)),
            column((epoch,), len(kept)),
            np.array([changes[i] for i in kept], dtype=np.int64),
        )

    def _multiset_diffs(self, requests: Requests, epoch: int) -> Updates:
        """Requests in order, each +1 or -1 on its row's count, which never goes below
        zero: retracting a copy that is not there is a no-op."""
        order = sort_order(requests.columns, stable=True)  # sequence order within a row
        cols = tuple(c[order] for c in requests.columns)
        steps = np.where(requests.inserting[order], 1, -1).astype(np.int64)
        starts = np.flatnonzero(run_starts(cols))
        rows = tuple(c[starts] for c in cols)
        present = self._present_counts(rows)
        sizes = np.diff(np.append(starts, len(steps)))
        group = np.repeat(np.arange(len(starts)), sizes)
        running = np.cumsum(steps)
        before = (running[starts] - steps[starts])[group]  # the sum before each row's run
        level = present[group] + running - before  # the count after each step, unfloored
        lowest = np.minimum.reduceat(level, starts)
        # Flooring at zero after each step lifts the end by how far the lowest point dipped.
        change = np.add.reduceat(steps, starts) - np.minimum(lowest, 0)
        keep = change != 0
        return Updates(
            tuple(c[keep] for c in rows), column((epoch,), int(keep.sum())), change[keep]
        )

    def _lww_diffs(self, requests: Requests, epoch: int) -> Updates:
        entity, value = requests.columns
        order = np.argsort(entity, kind="stable")
        ent, val, ins = entity[order], value[order], requests.inserting[order]
        position = np.arange(len(ent))
        starts = run_starts([ent])
        first = np.flatnonzero(starts)
        group = np.cumsum(starts) - 1
        current_has, current_val = self._current_values(ent[first])
        # Replaying an entity's requests: its last insert sets the value (else the
        # current value stands); of the retracts after that point, one naming that
        # value clears it and every other is a no-op.
        last_ins = np.maximum.reduceat(np.where(ins, position, -1), first)
        written = last_ins >= first
        base_has = written | current_has
        base_val = np.where(written, val[np.maximum(last_ins, 0)], current_val)
        hits = (position > last_ins[group]) & ~ins & (val == base_val[group]) & base_has[group]
        cleared = np.bincount(group[hits], minlength=len(first)) > 0
        want_has = base_has & ~cleared
        want_val = base_val
        drop = current_has & (~want_has | (want_val != current_val))
        add = want_has & (~current_has | (want_val != current_val))
        e = ent[first]
        cols = (
            np.concatenate([e[drop], e[add]]),
            np.concatenate([current_val[drop], want_val[add]]),
        )
        diffs = np.concatenate(
            [-np.ones(int(drop.sum()), np.int64), np.ones(int(add.sum()), np.int64)]
        )
        return Updates(cols, column((epoch,), len(diffs)), diffs)

    def _current_values(self, entities: Column) -> tuple[npt.NDArray[np.bool_], Column]:
        owner, found = self.presence.spine.lookup([entities])
        acc = consolidate(Updates((owner, found.columns[1]), column((0,), len(owner)), found.diffs))
        live = acc.diffs > 0
        has = np.zeros(len(entities), dtype=bool)
        value = np.zeros(len(entities), dtype=self.dtypes[1])
        has[acc.columns[0][live]] = True
        value[acc.columns[0][live]] = acc.columns[1][live]
        return has, value

    def keep_from(self, epoch: int) -> None:
        """Let history before `epoch` collapse: states at `epoch` and later stay exact
        (an input without history keeps only the current state)."""
        if self.kept is not None:
            self.kept.set_frontier(Antichain([(epoch,)]))

    def state_as_of(self, epoch: int) -> Updates:
        """The rows and their counts at the end of `epoch` (consolidated, at time
        `(epoch,)`); exact for epochs from the last `keep_from` on (for the current
        epoch only, without history)."""
        return self.presence.spine.accumulate((epoch,))

    def arrangement(self, permutation: Sequence[int], key_arity: int) -> SharedArrangement:
        """The shared arrangement of columns `permutation` keyed by the first `key_arity`."""
        spec = (tuple(permutation), key_arity)
        found = self.arrangements.get(spec)
        if found is None:
            dtypes = [self.dtypes[i] for i in spec[0]]
            found = SharedArrangement(key_arity, dtypes, f"{self.name}{list(spec[0])}/{key_arity}")
            state, hashes = self.presence.spine.state()
            since = found.spine.default_since
            permuted = Updates(tuple(state.columns[i] for i in spec[0]), state.times, state.diffs)
            if len(permuted):  # keyed like the state: its hashes too are shared
                same = self._like_presence(spec)
                description = Description(since, since, Antichain())
                found.spine.append(
                    Batch.build(permuted, key_arity, description, hashes=hashes if same else None)
                )
            self.arrangements[spec] = found
        return found

    def _like_presence(self, spec: tuple[tuple[int, ...], int]) -> bool:
        """Whether the arrangement `spec` is keyed like the presence arrangement (the
        same columns in the same order, the same key): same hashes, same order."""
        return spec == (tuple(range(self.arity)), self.presence.key_arity)

    def stage(self, diffs: Updates, epoch: int) -> None:
        """Make `diffs` the pending batch of epoch `epoch` in every arrangement."""
        self._staged_size = self._size_change(diffs)
        hashed, self._hashed = self._hashed, None
        hashes, known = hashed[1:] if hashed is not None and hashed[0] is diffs else (None, None)
        state = self.presence.stage(diffs, epoch, hashes)
        if known is not None and state.hashes is hashes:  # the new rows as they were sorted
            known.last = state
            self.presence.spine.expect(known)
        for spec, arr in self.arrangements.items():
            perm = spec[0]
            permuted = Updates(tuple(diffs.columns[i] for i in perm), diffs.times, diffs.diffs)
            if self._like_presence(spec):  # the same batch: built once, held once
                arr.stage_batch(state, epoch)
            else:
                arr.stage(permuted, epoch)

    def unstage(self) -> None:
        """Forget a staged epoch that will not commit."""
        self._staged_size = 0
        self._hashed = None
        self.presence.spine.expect(None)
        self.presence.unstage()
        for arr in self.arrangements.values():
            arr.unstage()

    def seal(self, next_epoch: int) -> None:
        self._sealed_size += self._staged_size
        self._staged_size = 0
        self.presence.seal(next_epoch)
        self.presence.spine.expect(None)  # (the order found for the seal's compaction)
        for arr in self.arrangements.values():
            arr.seal(next_epoch)

    def _size_change(self, diffs: Updates) -> int:
        """How many distinct rows `diffs` (not yet staged) add, net.

        Under set and last-write-wins semantics every diff is +1 or -1 on a distinct
        row that was out or in, so the sum is the change; a multiset row counts when
        its multiplicity moves between zero and positive.
        """
        if len(diffs) == 0:
            return 0
        if self.semantics != "multiset":
            return int(diffs.diffs.sum())
        rows = consolidate(diffs.with_times(column((0,), len(diffs))))
        before = self._present_counts(rows.columns)
        after = before + rows.diffs
        return int((after > 0).sum()) - int((before > 0).sum())

    def footprint(self) -> dict[str, Footprint]:
        """Bytes held by kind of structure, for the presence arrangement and then each
        arrangement dataflows read (`differential.trace.footprint`): an array two of
        them share counts for the first."""
        first = Footprint()
        found: dict[str, Footprint] = {}
        for arranged in [self.presence, *self.arrangements.values()]:
            counted = first if not found else first.split()
            counted.spine(arranged.spine)
            if arranged.pending is not None:
                counted.batch(arranged.pending)
            found[arranged.name] = counted
        return found

    def drop_unread(self) -> None:
        """Forget arrangements no dataflow reads any more."""
        self.arrangements = {k: a for k, a in self.arrangements.items() if a.readers}
