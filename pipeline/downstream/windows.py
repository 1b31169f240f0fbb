"""TyDi QA examples -> windows of at most 2,048 codepoints: Google's CANINE recipe, in codepoints.

    settings = WindowSettings()                           # Google's flags (below)
    counts = Counter()
    rows = window_example(example, settings, training=True, counts=counts)   # [Window]
    rows = window_line(json_line, settings, training=False, counts=counts)    # a line of the official file

Pure Python and numpy: no Beam, no files; pipeline/downstream/job.py calls it on each example.
The row's contract (columns, special codepoints, AnswerType) is contract/tydiqa.py's.

The recipe (google-research/language, language/canine/tydiqa: preproc.py `create_entry_from_json`
and `convert_single_example`, data.py `get_first_annotation` and `make_tydi_answer`,
char_splitter.py; the flags' defaults in run_tydi.py and the README):
  * contexts: the first `max_passages` (45) candidate passages, each preceded by its passage
    marker (PASSAGE_0 + candidate index), all joined by single spaces: "M0 p0 M1 p1 ...". Text
    outside the candidates is never read (Google's contexts hold only them).
  * a window: CLS [Q] question SEP stretch SEP, the question its last `max_question` (256)
    characters, at most `max_length` (2,048) positions. Stretches start at 0 and every
    `min(length, stride)` (512) after, the last one reaching the end of the contexts (Google's
    while loop over doc_spans).
  * the label, from the first annotation (get_first_annotation): of the annotations that name a
    passage, sorted by passage index, the first with a minimal answer in the kept passages, else
    the first whose passage is kept. A minimal answer is MINIMAL over its characters; a passage
    answer is PASSAGE over the whole passage; none is UNKNOWN. Deviation: a YES/NO annotation is
    labelled YES or NO (its span the passage, as PASSAGE), where Google's default
    ignore_yes_no_answer=True labels it PASSAGE, so the type head learns to answer yes/no.
  * training (the train role): a window that holds the whole answer span is labelled with it, its
    first and last positions inclusive; any other window (or every window of an UNKNOWN example)
    is kept with probability `include_unknowns` (0.1), labelled UNKNOWN at (0, 0). Google draws
    random.random(); here the draw is a hash of (seed, example id, window index)
    (pipeline/seeds.py tydi_window_draw), so the same windows are kept on any worker count.
  * prediction (dev, test): every window is kept; its label is computed the same way (UNKNOWN where
    the window lacks the answer), for a dev loss; nothing is dropped for a label's sake.

Every example has one outcome, counted in `counts` (a Counter keyed by (group, name)):
("examples", "read") = ("examples", "windowed") + the ("rejected", reason) counts. Rejected:
the reader's reasons (contract/tydiqa.py REASONS), and here: `no_passages` (no candidate: no
window, as Google's loop makes none), `empty_passage` (a kept candidate with no text: Google's
create_entry_from_json drops the example), and in training only `empty_minimal_answer` (Google
finds no character in it and makes no feature) and `minimal_outside_passage` (its sanity check
prunes it). ("labels", TYPE) counts the windowed examples by label; ("answers_lost",
"beyond_max_passages") those whose every annotated passage lies past max_passages, which Google
makes UNKNOWN too. Windows: ("windows", TYPE) written, ("dropped", reason) not drawn in training:
`no_answer_in_window` (the example has an answer elsewhere) or `unknown_example`.
Characters of the aliased private-use range (contract/schema.py ALIASED_RANGE, U+0000 too) in a
question or a kept passage could pass for CLS, SEP, [Q] or a marker: they are replaced by U+FFFD
in input_ids, as the pretraining cleaner does, and counted ("characters", "replaced").
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from contract import schema
from contract.tydiqa import (MAX_PASSAGE_MARKERS, QUESTION, AnswerType, Annotation, Example, Rejected, passage_marker,
                             parse_example)
from pipeline import seeds
from pipeline.sources import InputError


@dataclass(frozen=True)
class WindowSettings:
    """Everything that decides the windows of an example (Google's flags of the same meaning)."""
    max_length: int = 2048  # max_seq_length: positions of a window, CLS to the last SEP
    stride: int = 512  # doc_stride: between the starts of two windows of one example
    max_question: int = 256  # max_question_length: a longer question keeps its LAST characters
    include_unknowns: float = 0.1  # training: the share of windows without the answer that are kept
    max_passages: int = 45  # candidate passages read, from the first; an answer past them is lost
    seed: int = 0  # of the include_unknowns draw

    def validate(self) -> "WindowSettings":
        room = self.max_length - self.max_question - 4  # CLS, [Q], SEP, SEP
        if room < 1:
            raise ValueError(f"max_length {self.max_length}: leaves no room for the document after a question of "
                             f"{self.max_question} characters (at least max_question + 5)")
        if self.stride < 1:
            raise ValueError(f"stride {self.stride}: must be 1 or more")
        if self.max_question < 0:
            raise ValueError(f"max_question {self.max_question}: must be 0 or more")
        if not 0.0 <= self.include_unknowns <= 1.0:
            raise ValueError(f"include_unknowns {self.include_unknowns}: a probability, 0 to 1")
        if not 1 <= self.max_passages <= MAX_PASSAGE_MARKERS:
            raise ValueError(f"max_passages {self.max_passages}: 1 to {MAX_PASSAGE_MARKERS} (each needs a marker "
                             "codepoint in the private-use range)")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


class Window(NamedTuple):
    """One row of contract/tydiqa.py WINDOW_COLUMNS."""
    example_id: int
    language: str
    window: int  # index among ALL the example's windows: a training row may skip those not drawn
    input_ids: np.ndarray  # int32, unpadded
    doc_chars: np.ndarray  # int32, -1 where no document character
    doc_start: int
    start: int
    end: int
    answer_type: int


class Contexts(NamedTuple):
    codepoints: np.ndarray  # int32: M0 ' ' p0 ' ' M1 ' ' p1 ...
    doc_chars: np.ndarray  # int32: document offset of each, -1 at markers and spaces
    passage_at: list  # position in the contexts of each kept passage's first character


_SPACE = ord(" ")


def codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int32)


def _clean(cps: np.ndarray, counts: Counter) -> np.ndarray:
    """Aliased characters -> U+FFFD (counted): none may pass for a special codepoint."""
    aliased = schema.is_aliased(cps)
    if aliased.any():
        counts["characters", "replaced"] += int(aliased.sum())
        cps = np.where(aliased, schema.REPLACEMENT_CHARACTER, cps).astype(np.int32)
    return cps


def build_contexts(ex: Example, max_passages: int, counts: Counter) -> Contexts:
    """The kept passages with their markers, joined by spaces, and where each passage starts."""
    doc = codepoints(ex.document)
    cps, chars, passage_at, position = [], [], [], 0
    for i, (s, e) in enumerate(ex.passages[:max_passages]):
        head = [passage_marker(i), _SPACE] if i == 0 else [_SPACE, passage_marker(i), _SPACE]
        cps += [np.asarray(head, np.int32), _clean(doc[s:e], counts)]
        chars += [np.full(len(head), -1, np.int32), np.arange(s, e, dtype=np.int32)]
        passage_at.append(position + len(head))
        position += len(head) + (e - s)
    if not cps:
        return Contexts(np.zeros(0, np.int32), np.zeros(0, np.int32), [])
    return Contexts(np.concatenate(cps), np.concatenate(chars), passage_at)


def first_annotation(ex: Example, max_passages: int) -> Annotation | None:
    """data.get_first_annotation: of the annotations naming a passage (sorted by its index, a
    stable sort), the first with a minimal answer in the kept passages, else the first whose
    passage is kept; None if none."""
    positive = sorted((a for a in ex.annotations if a.passage >= 0), key=lambda a: a.passage)
    kept = [a for a in positive if a.passage < max_passages]
    return next((a for a in kept if a.minimal is not None), kept[0] if kept else None)


def label(ex: Example, ctx: Contexts, max_passages: int) -> tuple[AnswerType, tuple[int, int] | None, str | None]:
    """(type, (first, last) position in the contexts or None, why the label cannot be made or None)."""
    a = first_annotation(ex, max_passages)
    if a is None:
        return AnswerType.UNKNOWN, None, None
    ps, pe = ex.passages[a.passage]
    at = ctx.passage_at[a.passage]
    if a.minimal is not None:
        s, e = a.minimal
        if s == e:
            return AnswerType.MINIMAL, None, "empty_minimal_answer"
        if not ps <= s < e <= pe:
            return AnswerType.MINIMAL, None, "minimal_outside_passage"
        return AnswerType.MINIMAL, (at + s - ps, at + e - 1 - ps), None
    kind = {"YES": AnswerType.YES, "NO": AnswerType.NO}.get(a.yes_no, AnswerType.PASSAGE)
    return kind, (at, at + pe - ps - 1), None


def spans(n: int, room: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each stretch of `n` contexts positions: convert_single_example's loop."""
    out, start = [], 0
    while start < n:
        length = min(n - start, room)
        out.append((start, length))
        if start + length == n:
            break
        start += min(length, stride)
    return out


def window_example(ex: Example, settings: WindowSettings, training: bool, counts: Counter) -> list[Window]:
    """An example's windows (module docstring), every outcome counted in `counts`."""
    if not ex.passages:
        counts["rejected", "no_passages"] += 1
        return []
    kept = ex.passages[:settings.max_passages]
    if any(s == e for s, e in kept):
        counts["rejected", "empty_passage"] += 1
        return []
    ctx = build_contexts(ex, settings.max_passages, counts)
    kind, span, problem = label(ex, ctx, settings.max_passages)
    if problem is not None:
        if training:
            counts["rejected", problem] += 1
            return []
        counts["labels_unusable", problem] += 1
        kind = AnswerType.UNKNOWN
    if kind == AnswerType.UNKNOWN and any(a.passage >= settings.max_passages for a in ex.annotations):
        counts["answers_lost", "beyond_max_passages"] += 1
    counts["examples", "windowed"] += 1
    counts["labels", kind.name] += 1

    question = codepoints(ex.question)
    question = _clean(question[max(0, len(question) - settings.max_question):], counts)  # its LAST characters
    prefix = np.concatenate([np.asarray([schema.CLS, QUESTION], np.int32), question,
                             np.asarray([schema.SEP], np.int32)])
    doc_start = len(prefix)
    room = settings.max_length - doc_start - 1
    no_chars = np.full(doc_start, -1, np.int32)
    sep, minus_one = np.asarray([schema.SEP], np.int32), np.asarray([-1], np.int32)
    rows = []
    for index, (ws, length) in enumerate(spans(len(ctx.codepoints), room, settings.stride)):
        if span is not None and ws <= span[0] and span[1] < ws + length:
            start, end, answer = span[0] - ws + doc_start, span[1] - ws + doc_start, kind
        else:
            start, end, answer = 0, 0, AnswerType.UNKNOWN
            if training:
                reason = "unknown_example" if kind == AnswerType.UNKNOWN else "no_answer_in_window"
                if not seeds.tydi_window_draw(settings.seed, ex.example_id, index) < settings.include_unknowns:
                    counts["dropped", reason] += 1
                    continue
        counts["windows", answer.name] += 1
        rows.append(Window(
            ex.example_id, ex.language, index,
            np.concatenate([prefix, ctx.codepoints[ws:ws + length], sep]),
            np.concatenate([no_chars, ctx.doc_chars[ws:ws + length], minus_one]),
            doc_start, int(start), int(end), int(answer)))
    return rows


def window_record(record: dict, settings: WindowSettings, training: bool, counts: Counter) -> list[Window]:
    """A json-decoded line of the official files: read (contract/tydiqa.py parse_example, its
    rejections counted by reason) and windowed."""
    counts["examples", "read"] += 1
    parsed = parse_example(record)
    if isinstance(parsed, Rejected):
        counts["rejected", parsed.reason] += 1
        return []
    return window_example(parsed, settings, training, counts)


def window_line(line: bytes | str, settings: WindowSettings, training: bool, counts: Counter,
                where: str = "") -> list[Window]:
    """One line of an official file (blank lines: no example, not counted)."""
    if not line.strip():
        return []
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:  # not a TyDi QA file: the run stops, naming the line
        raise InputError(f"{where}: not JSON ({e}); give TyDi QA's primary-task files (.jsonl or .jsonl.gz)") from None
    return window_record(record, settings, training, counts)


def nested(counts: Counter) -> dict:
    """{(group, name): n} -> {group: {name: n}}, names sorted: the manifest's form."""
    out: dict = {}
    for (group, name), n in sorted(counts.items()):
        out.setdefault(group, {})[name] = n
    return out
