"""TyDi QA's primary-task files in, examples in codepoints out, byte offsets back; and the windows'
contract: what one Parquet row of `pipeline/downstream/` holds, which `canine finetune tydiqa` reads.
Both sides use it: the pipeline windows the examples, the trainer reads the windows and maps the
predicted spans back to bytes with the same reader (it imports fsspec, numpy and pyarrow only).

    stats = ReadStats()
    for ex in read_examples("tydiqa-v1.0-dev.jsonl.gz", stats):   # streamed, one line at a time
        ex.document[slice(*ex.passages[i])]                       # a passage candidate's text
        ex.annotations[0].minimal                                 # (start_char, end_char) or None
    stats.rejected                                                # Counter: reason -> examples
    ... the model predicts a span in codepoints ...
    start_byte, end_byte = to_bytes(ex, start_char, end_char)     # the official prediction format

The official files (google-research-datasets/tydiqa, README.md "Download the dataset":
tydiqa-v1.0-{train,dev}.jsonl.gz) give every span as UTF-8 BYTE offsets into document_plaintext,
end exclusive, -1 for none (baseline/data.py byte_slice). CANINE reads codepoints, so every offset
is converted here, once and exactly, and the predicted spans are converted back to bytes for
tydi_eval.py, which compares bytes (training/finetune/tydi_score.py).

An offset must fall on a character boundary. One that falls inside a multi-byte character has no
codepoint equivalent: rounding it either way would move a gold answer by a character, so the
example is rejected with a reason and counted (ReadStats), never guessed, as the pipeline counts
every drop with its reason. Offsets 0 and len(utf-8 bytes), the document's two ends, are boundaries.

Streaming: the train file is 1.6 GB gzipped; it is read line by line through fsspec (gzip inferred
from the name), and only the example at hand is held.

The windows (pipeline/downstream/windows.py builds them; docs/downstream.md "TyDi QA: the windows"):
Google's CANINE recipe for TyDi QA (google-research/language, language/canine/tydiqa/preproc.py
`create_entry_from_json` and `convert_single_example`, char_splitter.py), in codepoints. The first
`max_passages` candidate passages, each after its passage marker, joined by single spaces, are the
"contexts"; a window is

    position  0    1    2 .. q+1        q+2    doc_start ..                      last
    input     CLS  [Q]  question[-256:] SEP    a stretch of the contexts         SEP
    segment   0    0    0               0      1                                 1

so `doc_start` = q + 3 and a position's segment id (token_type_ids) is `position >= doc_start`.
`doc_chars` maps each position to the document codepoint it holds, -1 for every position that
holds none (CLS, [Q], the question, the SEPs, the passage markers and the joining spaces): a
predicted span (start, end), inclusive, is the document's codepoints doc_chars[start] ..
doc_chars[end] + 1, and `to_bytes` gives the official byte offsets. Labels: `answer_type` is
Google's data.AnswerType, `start`/`end` the answer's first and last positions in the window
(inclusive), 0 and 0 (CLS) for UNKNOWN.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import enum
from functools import cache

import fsspec
import numpy as np

from contract.schema import CLS, SEP  # noqa: F401 - the windows' CLS and SEP, named here for both sides

YES_NO = ("NONE", "YES", "NO")  # the files' yes_no_answer values (tydi_eval.py lower-cases them)

# Why an example is rejected; ReadStats counts each.
REASONS = (
    "offset_inside_character",  # a byte offset falls inside a multi-byte UTF-8 character
    "offset_out_of_range",  # a byte offset is < 0 (other than a null span) or past the document's end
    "bad_span",  # start > end, or one end -1 and the other not (eval_utils.Span refuses both)
    "passage_index_out_of_range",  # an annotation's candidate_index is not -1 and not a candidate
    "bad_yes_no",  # yes_no_answer is not NONE, YES or NO
    "not_utf8",  # the document holds a lone surrogate: it has no UTF-8 bytes, so no byte offsets
)


class OffsetInsideCharacter(ValueError):
    """A byte offset that falls inside a multi-byte character: the character holding it starts at
    byte `char_start` and is codepoint `char_index` of the document."""

    def __init__(self, example_id, offset: int, char_index: int, char_start: int, char_bytes: int):
        self.example_id, self.offset = example_id, offset
        self.char_index, self.char_start = char_index, char_start
        super().__init__(
            f"example {example_id}: byte offset {offset} is inside character {char_index} "
            f"(bytes {char_start}..{char_start + char_bytes - 1}, {char_bytes}-byte UTF-8)")


class OffsetOutOfRange(ValueError):
    """An offset (byte or codepoint) outside 0..the document's length."""

    def __init__(self, example_id, offset: int, unit: str, length: int):
        self.example_id, self.offset = example_id, offset
        super().__init__(f"example {example_id}: {unit} offset {offset} is outside 0..{length}")


class ByteOffsets:
    """Exact byte <-> codepoint offsets of one document's UTF-8 encoding.

    `_starts[i]` is the byte where codepoint i starts, and `_starts[n]` the byte length, so
    codepoint -> byte is one index (O(1)) and byte -> codepoint one binary search (O(log n)). The
    widths come from the codepoints' values (RFC 3629 §3: 1 byte below U+0080, 2 below U+0800, 3
    below U+10000, else 4), computed with numpy, not by encoding each character.
    """

    def __init__(self, text: str, example_id=None):
        self.example_id = example_id
        # UTF-32 gives the codepoints as integers in one C call; it refuses lone surrogates, as
        # UTF-8 does (UnicodeEncodeError, a ValueError), so a text with no UTF-8 bytes stops here.
        cps = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        widths = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
        self._starts = np.zeros(len(cps) + 1, dtype=np.int64)
        np.cumsum(widths, out=self._starts[1:])
        self.chars = len(cps)
        self.bytes = int(self._starts[-1])

    def to_char(self, byte_offset: int) -> int:
        """The codepoint offset at `byte_offset`; OffsetInsideCharacter if it splits a character."""
        if not 0 <= byte_offset <= self.bytes:
            raise OffsetOutOfRange(self.example_id, byte_offset, "byte", self.bytes)
        i = int(np.searchsorted(self._starts, byte_offset, side="left"))
        if self._starts[i] != byte_offset:  # then _starts[i-1] < byte_offset < _starts[i]
            start = int(self._starts[i - 1])
            raise OffsetInsideCharacter(self.example_id, byte_offset, i - 1, start, int(self._starts[i]) - start)
        return i

    def to_byte(self, char_offset: int) -> int:
        """The byte offset where codepoint `char_offset` starts (the byte length at the end)."""
        if not 0 <= char_offset <= self.chars:
            raise OffsetOutOfRange(self.example_id, char_offset, "codepoint", self.chars)
        return int(self._starts[char_offset])


@dataclass(frozen=True)
class Annotation:
    """One annotator's answer, in codepoints of the document."""
    passage: int  # index into Example.passages; -1: no passage answers (NULL)
    minimal: tuple[int, int] | None  # (start_char, end_char), end exclusive; None: no span
    yes_no: str  # NONE, YES or NO; a YES/NO answer has no minimal span


@dataclass
class Example:
    example_id: int
    language: str  # the files' lower-case names: arabic, bengali, english, finnish, ...
    question: str
    document: str  # document_plaintext
    passages: list[tuple[int, int]]  # passage_answer_candidates as (start_char, end_char), end exclusive
    annotations: list[Annotation]  # one on train, three on dev (tydi_eval.py votes over them)
    url: str = ""
    # The document's offsets, kept so to_bytes needs no second pass over the text.
    offsets: ByteOffsets | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Rejected:
    example_id: int
    reason: str  # one of REASONS
    detail: str  # what and where: the field, the offset, the character


@dataclass
class ReadStats:
    """What a read_examples pass saw: lines read, examples kept, and rejections by reason."""
    read: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> examples
    rejects: list[Rejected] = field(default_factory=list)  # every rejection (ids and reasons only)


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        self.reason, self.detail = reason, detail


def _span(offsets: ByteOffsets, start: int, end: int, what: str) -> tuple[int, int] | None:
    """A byte span of the files as codepoints; None for the null span (-1, -1)."""
    if start < 0 and end < 0:  # eval_utils.Span.is_null_span: both negative, not only -1
        return None
    if (start < 0) != (end < 0) or start > end:
        raise _Reject("bad_span", f"{what} bytes ({start}, {end})")
    try:
        return offsets.to_char(start), offsets.to_char(end)
    except OffsetInsideCharacter as e:
        raise _Reject("offset_inside_character", f"{what}: {e}") from e
    except OffsetOutOfRange as e:
        raise _Reject("offset_out_of_range", f"{what}: {e}") from e


def parse_example(record: dict) -> Example | Rejected:
    """One line of the official files (already json-decoded) as an Example, or why not."""
    example_id = int(record["example_id"])
    try:
        try:
            offsets = ByteOffsets(record["document_plaintext"], example_id)
        except UnicodeEncodeError as e:
            raise _Reject("not_utf8", f"document_plaintext: {e}") from e
        passages = []
        for i, c in enumerate(record["passage_answer_candidates"]):
            span = _span(offsets, c["plaintext_start_byte"], c["plaintext_end_byte"], f"passage candidate {i}")
            if span is None:
                raise _Reject("bad_span", f"passage candidate {i} is a null span")
            passages.append(span)
        annotations = []
        for k, a in enumerate(record.get("annotations", [])):
            passage = a["passage_answer"]["candidate_index"]
            if not -1 <= passage < len(passages):
                raise _Reject("passage_index_out_of_range",
                              f"annotation {k}: candidate_index {passage} of {len(passages)} candidates")
            m = a["minimal_answer"]
            minimal = _span(offsets, m["plaintext_start_byte"], m["plaintext_end_byte"], f"annotation {k} minimal answer")
            yes_no = a["yes_no_answer"].upper()
            if yes_no not in YES_NO:
                raise _Reject("bad_yes_no", f"annotation {k}: yes_no_answer {a['yes_no_answer']!r}")
            annotations.append(Annotation(passage, minimal, yes_no))
    except _Reject as r:
        return Rejected(example_id, r.reason, r.detail)
    return Example(example_id=example_id, language=record["language"], question=record["question_text"],
                   document=record["document_plaintext"], passages=passages, annotations=annotations,
                   url=record.get("document_url", ""), offsets=offsets)


def read_examples(path: str, stats: ReadStats | None = None) -> Iterator[Example]:
    """The examples of an official primary-task file (.jsonl or .jsonl.gz, a local path or any
    fsspec URL), in file order, one line in memory at a time. Rejected examples are not yielded;
    they are counted in `stats` if given."""
    stats = stats if stats is not None else ReadStats()
    with fsspec.open(path, "rt", compression="infer", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_no}: not JSON: {e}") from e
            stats.read += 1
            parsed = parse_example(record)
            if isinstance(parsed, Rejected):
                stats.rejected[parsed.reason] += 1
                stats.rejects.append(parsed)
                continue
            stats.kept += 1
            yield parsed


def to_bytes(example: Example, start_char: int, end_char: int) -> tuple[int, int]:
    """A codepoint span of `example`'s document (end exclusive) as the files' UTF-8 byte offsets,
    which is what tydi_eval.py reads (a prediction's start_byte_offset, end_byte_offset)."""
    if start_char > end_char:
        raise ValueError(f"example {example.example_id}: span ({start_char}, {end_char}) starts after its end")
    offsets = example.offsets or ByteOffsets(example.document, example.example_id)
    return offsets.to_byte(start_char), offsets.to_byte(end_char)


# --- The windows' contract ------------------------------------------------------------------------
# Special codepoints after CANINE's own (contract/schema.py CLS..RESERVED = 0xE000..0xE004):
# char_splitter.py gives [Q] the next private-use codepoint, max(SPECIAL_CODEPOINTS) + 1, and
# passage marker i the one after it plus i.
QUESTION = 0xE005  # [Q], before the question
PASSAGE_0 = 0xE006  # passage marker of candidate 0; candidate i's is PASSAGE_0 + i
# Markers stay inside the range the pretraining cleaner keeps free of text (schema.ALIASED_RANGE,
# 0xE000..0xE0FF): at most 250 candidates get one (Google's max_passages is 45).
MAX_PASSAGE_MARKERS = 0xE0FF - PASSAGE_0 + 1


def passage_marker(i: int) -> int:
    """The codepoint before candidate passage `i` in a window."""
    if not 0 <= i < MAX_PASSAGE_MARKERS:
        raise ValueError(f"passage marker {i}: only candidates 0..{MAX_PASSAGE_MARKERS - 1} have one")
    return PASSAGE_0 + i


class AnswerType(enum.IntEnum):
    """A window's answer type: Google's numbering (language/canine/tydiqa/data.py AnswerType).
    YES and NO label a yes/no annotation's passage; Google's default ignore_yes_no_answer=True
    labels it PASSAGE instead, this project keeps the type, so the type head can answer yes/no."""
    UNKNOWN = 0
    YES = 1
    NO = 2
    MINIMAL = 3
    PASSAGE = 4


WINDOW_SCHEMA_VERSION = 1
# One Parquet row per window: (name, Arrow type, what it holds).
WINDOW_COLUMNS = (
    ("example_id", "int64", "the example's example_id in the official file"),
    ("language", "string", "the files' lower-case language name (arabic, bengali, ...)"),
    ("window", "int32", "the window's index among its example's windows, from 0 (in document order)"),
    ("input_ids", "list<int32>", "codepoints: CLS [Q] question SEP contexts... SEP, unpadded"),
    ("doc_chars", "list<int32>", "per position, the document codepoint it holds; -1 where none"),
    ("doc_start", "int32", "the first position after the question's SEP; segment id = position >= doc_start"),
    ("start", "int32", "the answer's first position (inclusive); 0 for UNKNOWN"),
    ("end", "int32", "the answer's last position (inclusive); 0 for UNKNOWN"),
    ("answer_type", "int8", "AnswerType"),
)
WINDOW_COLUMN_NAMES = tuple(name for name, _, _ in WINDOW_COLUMNS)
# doc_chars is written DELTA_BINARY_PACKED without a dictionary: consecutive document characters
# differ by 1, so a window's 2,048 offsets pack to about 100 bytes with zstd, 6x less than PLAIN
# with zstd (measured: pipeline/downstream/parquet.py).
WINDOW_ENCODINGS = {"doc_chars.list.element": "DELTA_BINARY_PACKED"}  # the leaf's path: "doc_chars" alone is ignored
WINDOWS_MANIFEST = "_manifest.json"  # per role folder: OUTPUT/ROLE/_manifest.json, written last
WINDOWS_FORMAT = "canine.tydiqa.windows"  # the manifest's "format"; its "version" is WINDOW_SCHEMA_VERSION


@cache
def window_schema():
    """The windows' Arrow schema (pyarrow imported on first use: reading the files needs none)."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "int32": pa.int32(), "int8": pa.int8(), "string": pa.string(),
             "list<int32>": pa.list_(pa.int32())}
    return pa.schema([pa.field(name, types[kind], nullable=False) for name, kind, _ in WINDOW_COLUMNS],
                     metadata={b"canine.tydiqa.windows_version": str(WINDOW_SCHEMA_VERSION).encode()})


def segment_ids(doc_start: int, length: int) -> np.ndarray:
    """A window's token_type_ids: 0 for CLS .. the question's SEP, 1 from doc_start on."""
    return (np.arange(length) >= doc_start).astype(np.int8)


def read_windows_manifest(output: str, role: str) -> dict:
    """OUTPUT/ROLE/_manifest.json as pipeline/downstream/prepare.py writes it, its format and
    version checked. Its `shards` ({path, rows, bytes, sha256}, path relative to OUTPUT/ROLE) are
    the role's files, its `settings` the windows' (max_length, stride, ...), its `counts` what
    became of every example and window. FileNotFoundError if the role was never prepared (or its
    run did not finish: the manifest is written last)."""
    url = f"{output.rstrip('/')}/{role}/{WINDOWS_MANIFEST}"
    try:
        with fsspec.open(url, "rt", encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{url}: no such file; the {role} windows are not prepared there "
                                "(pipeline/downstream/prepare.py writes it last)") from None
    if manifest.get("format") != WINDOWS_FORMAT or manifest.get("version") != WINDOW_SCHEMA_VERSION:
        raise ValueError(f"{url}: format {manifest.get('format')!r} version {manifest.get('version')!r}; this version "
                         f"reads {WINDOWS_FORMAT!r} version {WINDOW_SCHEMA_VERSION}: prepare the windows again")
    return manifest


def window_shard_urls(output: str, role: str) -> list[str]:
    """The URLs of a role's window shards, in the manifest's order."""
    manifest = read_windows_manifest(output, role)
    return [f"{output.rstrip('/')}/{role}/{shard['path']}" for shard in manifest["shards"]]
