"""The rules every contract row obeys, one set for both sides: `canine validate` checks every row
of an output with them (pipeline/output/validate.py), the batch builder every batch it builds
(training/batch.py). A row one side accepts the other accepts, and both name a broken one alike:

    example 'en-12-0-0' (row 3), field 'char_mask_positions', index 2: positions not strictly increasing

(validate puts the shard's path in front). Rows are read as columns of flat values plus offsets
(`Rows`), whatever holds them: a pyarrow Table or RecordBatch, a dict of lists or numpy arrays;
so each rule is a few array operations over a whole batch, not a loop over its rows. Two rules
need the pipeline's own definitions and only validate checks them: char_mask_positions cover
whole whitespace spans (pipeline/rows/masks.py), and subword spans are the tokenizer's.

Imports only the rest of the contract, numpy and pyarrow.
"""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from contract import schema

SUBWORD_COLUMNS = ("subword_starts", "subword_lengths", "subword_ids", "subword_predict_offsets", "subword_actions")
_ACTIONS = (schema.ACTION_MASK, schema.ACTION_RANDOM, schema.ACTION_KEEP)
_OUTSIDE = "position outside the example (must be in 1..length-1; 0 is CLS)"


class RowError(ValueError):
    """A row breaks the shard contract; the message names the example, field and position."""


@dataclass(frozen=True)
class Violation:
    row: int  # index of the row among those checked
    field: str
    problem: str
    index: int | None = None  # position in the row's list, for a list field

    def describe(self, ids) -> str:
        at = "" if self.index is None else f", index {self.index}"
        return f"example {ids[self.row]!r} (row {self.row}), field {self.field!r}{at}: {self.problem}"


class Rows:
    """Contract rows, column by column; list columns as (flat int64 values, offsets), read once."""

    def __init__(self, rows, required=("example_id", "codepoints", "segment_ids")):
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        names = rows.column_names if isinstance(rows, pa.Table) else list(rows)
        missing = [c for c in required if c not in names]
        if missing:
            raise RowError(f"rows lack contract column(s) {missing}; have {sorted(names)}")
        self.rows, self.names, self._ragged = rows, set(names), {}
        self.ids = [str(x) for x in self.scalars("example_id")]

    def __len__(self) -> int:
        return len(self.ids)

    def scalars(self, name: str) -> list:
        column = self.rows[name]
        return column.to_pylist() if isinstance(column, (pa.ChunkedArray, pa.Array)) else list(column)

    def ragged(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._ragged:
            if name not in self.names:
                raise RowError(f"rows lack contract column {name!r}")
            values, offsets = _flat(self.rows[name], name)
            if len(offsets) != len(self.ids) + 1:
                raise RowError(f"field {name!r} has {len(offsets) - 1} rows, example_id has {len(self.ids)}")
            self._ragged[name] = values, offsets
        return self._ragged[name]

    def counts(self, name: str) -> np.ndarray:
        return np.diff(self.ragged(name)[1])

    def error(self, v: Violation) -> RowError:
        return RowError(v.describe(self.ids))


def _flat(column, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A list column (Arrow, or a sequence of sequences / numpy arrays) -> (flat int64 values, offsets)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, (pa.ListArray, pa.LargeListArray)):
        if column.null_count:
            raise RowError(f"field {name!r}: null list at row {column.is_null().index(True).as_py()}")
        offsets = column.offsets.to_numpy().astype(np.int64)
        return column.flatten().to_numpy(zero_copy_only=False).astype(np.int64), offsets - offsets[0]
    try:
        parts = [np.asarray(x, dtype=np.int64).reshape(-1) for x in column]
    except (TypeError, ValueError) as exc:
        raise RowError(f"field {name!r}: not a list of integer lists ({exc})") from None
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, np.int64)), offsets


def check(rows: Rows, seq_len: int, **kw) -> None:
    """Raise RowError for the first rule a row breaks (the batch builder's check)."""
    for v in violations(rows, seq_len, **kw):
        raise rows.error(v)


def violations(rows: Rows, seq_len: int, *, char: bool = True, subword: bool = True,
               max_char_predictions: int = schema.MAX_CHAR_PREDICTIONS,
               max_subword_predictions: int = schema.MAX_SUBWORD_PREDICTIONS, vocab_size: int | None = None,
               more=()):
    """Every rule each row breaks (a Violation, in rule order), over the layout columns and the
    CANINE-C (`char`) and CANINE-S (`subword`) plans. A row that breaks a shape rule (lengths and
    counts) is left out of the rules on values, whose arrays would not line up for it. `more`:
    further rules, functions of `Columns` yielding Violations, run on the rows that broke none."""
    n = rows.counts("codepoints")
    bad = np.zeros(len(n), dtype=bool)
    shape = [("codepoints", (n < 2) | (n > seq_len),
              lambda r: f"length {n[r]} " + ("is shorter than CLS SEP" if n[r] < 2 else f"exceeds seq_len {seq_len}")),
             ("segment_ids", rows.counts("segment_ids") != n,
              lambda r: f"length {rows.counts('segment_ids')[r]} differs from codepoints ({n[r]})")]
    if char:
        c = rows.counts("char_mask_positions")
        shape.append(("char_mask_positions", c > max_char_predictions,
                      lambda r: f"{c[r]} entries exceed the limit of {max_char_predictions}"))
    if subword:
        k = rows.counts(SUBWORD_COLUMNS[0])
        for name in SUBWORD_COLUMNS[1:]:
            shape.append((name, rows.counts(name) != k,
                          lambda r, name=name: f"{rows.counts(name)[r]} values: count differs from subword_starts ({k[r]})"))
        shape.append((SUBWORD_COLUMNS[0], k > max_subword_predictions,
                      lambda r: f"{k[r]} entries exceed the limit of {max_subword_predictions}"))
    for field, broken, problem in shape:
        bad |= broken
        yield from (Violation(int(r), field, problem(r)) for r in np.flatnonzero(broken))
    cols = Columns(rows, np.flatnonzero(~bad))
    found = list(_layout(cols, "sop_label" in rows.names and rows.scalars("sop_label")))
    found += list(_char(cols)) if char else []
    found += list(_subword(cols, vocab_size)) if subword else []
    yield from found
    if more:
        bad[[v.row for v in found]] = True
        clean = Columns(rows, np.flatnonzero(~bad))
        for rule in more:
            yield from rule(clean)


class Columns:
    """The list columns of some rows (those that passed the shape rules), aligned: row i of them
    is row `rows_of[i]` of the whole."""

    def __init__(self, rows: Rows, rows_of: np.ndarray):
        self.rows, self.rows_of, self.all = rows, rows_of, len(rows_of) == len(rows)
        self.cps, self.offsets = self.ragged("codepoints")

    def row_of(self, flat: np.ndarray) -> np.ndarray:
        """The row of each flat index into the codepoints."""
        return np.searchsorted(self.offsets, flat, side="right") - 1

    def ragged(self, name):
        values, offsets = self.rows.ragged(name)
        if self.all:
            return values, offsets
        counts = np.diff(offsets)
        keep = np.zeros(len(counts), dtype=bool)
        keep[self.rows_of] = True
        return values[np.repeat(keep, counts)], np.concatenate([[0], np.cumsum(counts[keep])])

    def bad_rows(self, bad, field, problem):
        """A Violation for each row where `bad`; `problem` a string or a function of the row."""
        for r in np.flatnonzero(bad):
            yield Violation(int(self.rows_of[r]), field, problem(r) if callable(problem) else problem)

    def bad_items(self, bad, offsets, field, problem):
        """A Violation for each row with a bad list item (flat `bad`), at the first one."""
        flat = np.flatnonzero(bad)
        row = np.searchsorted(offsets, flat, side="right") - 1
        first = np.concatenate([[True], row[1:] != row[:-1]]) if len(flat) else np.zeros(0, bool)
        for f, r in zip(flat[first], row[first]):
            yield Violation(int(self.rows_of[r]), field, problem, int(f - offsets[r]))

    def positions(self, name):
        """A list column of absolute positions: (values, offsets, row of each, inside 1..length-1)."""
        values, offsets = self.ragged(name)
        row = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        inside = (values >= 1) & (values < np.diff(self.offsets)[row])
        return values, offsets, row, inside


def _layout(k: Columns, sop_labels):
    """CLS A SEP [B SEP]: no other special codepoint, segment ids 0 up to the first SEP and 1 after
    it, a sentence-order label that fits."""
    cps, starts, ends = k.cps, k.offsets[:-1], k.offsets[1:]
    sep = cps == schema.SEP
    allowed = sep.copy()
    allowed[starts] = cps[starts] == schema.CLS
    stray = np.bincount(k.row_of(np.flatnonzero(schema.is_aliased(cps) & ~allowed)), minlength=len(starts)) > 0
    yield from k.bad_rows(stray | ~allowed[starts] | ~sep[ends - 1], "codepoints",
                          "codepoints must be CLS text SEP [text SEP] with no other special or aliased codepoint")
    at = np.flatnonzero(sep)
    seps = np.bincount(k.row_of(at), minlength=len(starts))
    yield from k.bad_rows((seps < 1) | (seps > 2), "codepoints", lambda r: f"{seps[r]} SEPs (expected 1 or 2)")
    # The segment ids a row must have: 1 from its first SEP + 1 to its end, built as +1/-1 steps
    # summed in int8. Arrays of the batch's size are few and small here: at 64 rows of 2048,
    # every extra int64 temporary costs ~0.3 ms in page faults (measured), more than the arithmetic.
    first = ends.copy()
    np.minimum.at(first, k.row_of(at), at)
    pair = first + 1 < ends
    steps = np.zeros(len(cps) + 1, np.int8)
    steps[first[pair] + 1], steps[ends[pair]] = 1, -1
    segments, _ = k.ragged("segment_ids")
    yield from k.bad_items(segments != np.cumsum(steps[:-1], dtype=np.int8), k.offsets, "segment_ids",
                           "segment ids must be 0 up to the first SEP and 1 after it")
    if sop_labels:
        label = np.asarray(sop_labels, dtype=np.int64)[k.rows_of]
        pair = seps == 2
        wrong = ~np.isin(label, (schema.SOP_IN_ORDER, schema.SOP_SWAPPED, schema.SOP_NO_PAIR))
        wrong |= (label == schema.SOP_NO_PAIR) == pair
        yield from k.bad_rows(wrong, "sop_label",
                              lambda r: f"sop_label {label[r]} does not fit {'a pair' if pair[r] else 'one segment'}")


def _char(k: Columns):
    """Sorted positions inside the text, never on a special codepoint (CANINE-C, paper §3.2.1)."""
    name = "char_mask_positions"
    pos, offsets, row, inside = k.positions(name)
    yield from k.bad_items(~inside, offsets, name, _OUTSIDE)
    yield from k.bad_items(_not_after(pos, offsets, pos), offsets, name, "positions not strictly increasing")
    special = schema.is_aliased(k.cps[np.where(inside, k.offsets[row] + pos, 0)]) & inside
    yield from k.bad_items(special, offsets, name, "position on a special codepoint")


def _subword(k: Columns, vocab_size: int | None):
    """Spans in order inside the text, offsets inside their spans, known actions and ids, and
    exactly the replacement codepoints the ACTION_RANDOM spans need (CANINE-S, paper §3.2.2)."""
    starts, offsets, row, inside = k.positions("subword_starts")
    lengths, ids, predict, actions = (k.ragged(c)[0] for c in SUBWORD_COLUMNS[1:])
    yield from k.bad_items(~inside, offsets, "subword_starts", _OUTSIDE)
    yield from k.bad_items(_not_after(starts, offsets, starts + lengths - 1), offsets, "subword_starts",
                           "spans overlap or are not in increasing order")
    past = (lengths < 1) | (starts + lengths > np.diff(k.offsets)[row])
    yield from k.bad_items(past, offsets, "subword_lengths", "span empty or running past the example's end")
    yield from k.bad_items((predict < 0) | (predict >= lengths), offsets, "subword_predict_offsets",
                           "offset outside its span")
    yield from k.bad_items(~np.isin(actions, _ACTIONS), offsets, "subword_actions", "unknown action")
    unknown = (ids < 0) if vocab_size is None else (ids < 0) | (ids >= vocab_size)
    yield from k.bad_items(unknown, offsets, "subword_ids", f"id outside the vocabulary ({vocab_size or '?'} subwords)")
    _, rep_offsets = k.ragged("subword_replacements")
    got = np.diff(rep_offsets)
    want = np.bincount(row, weights=np.where(actions == schema.ACTION_RANDOM, lengths, 0),
                       minlength=len(got)).astype(np.int64)
    yield from k.bad_rows(got != want, "subword_replacements",
                          lambda r: f"total length {got[r]} differs from the summed lengths of its ACTION_RANDOM "
                                    f"spans ({want[r]})")


def _not_after(values, offsets, ends):
    """Flat mask: item i of a row does not come after item i - 1's end (values[i] <= ends[i - 1])."""
    bad = np.zeros(len(values), dtype=bool)
    bad[1:] = values[1:] <= ends[:-1]
    bad[offsets[:-1][np.diff(offsets) > 0]] = False  # a row's first item follows nothing
    return bad
