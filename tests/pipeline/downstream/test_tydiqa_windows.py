"""pipeline/downstream/windows.py on hand-made examples: the layout of a window, a multi-byte
document, an answer at a window's edge, the stride's overlap, the question's last characters,
passage-only and yes/no labels, the unknown windows' draw (deterministic, at its rate), every
outcome counted, and doc_chars back to the example's minimal answer exactly."""

import gzip
import json
import os
from collections import Counter

import numpy as np
import pytest

from contract import schema
from contract.tydiqa import PASSAGE_0, QUESTION, AnswerType, Annotation, Example, parse_example, segment_ids
from pipeline import seeds
from pipeline.sources import InputError
from pipeline.downstream.windows import WindowSettings, first_annotation, spans, window_example, window_line

TINY_DEV = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tydiqa", "tiny_dev.jsonl.gz")
SMALL = WindowSettings(max_length=32, stride=8, max_question=4, include_unknowns=0.0)


def example(document, passages, annotations=(), question="q?", example_id=7, language="english"):
    return Example(example_id, language, question, document, list(passages), list(annotations))


def text(ids):
    return "".join(chr(c) for c in ids)


def test_a_window_is_cls_q_question_sep_contexts_sep():
    doc = "alpha beta. gamma delta."
    ex = example(doc, [(0, 11), (12, 24)], [Annotation(1, (18, 23), "NONE")], question="who?")
    counts = Counter()
    [w] = window_example(ex, WindowSettings(), training=True, counts=counts)
    ids = w.input_ids.tolist()
    assert ids[:3] == [schema.CLS, QUESTION, ord("w")] and ids[6] == schema.SEP and w.doc_start == 7
    assert ids[-1] == schema.SEP
    # M0 ' ' p0 ' ' M1 ' ' p1: markers and joining spaces hold no document character
    contexts = ids[w.doc_start:-1]
    assert contexts[0] == PASSAGE_0 and contexts[14] == PASSAGE_0 + 1
    assert text(contexts) == f"{chr(PASSAGE_0)} alpha beta. {chr(PASSAGE_0 + 1)} gamma delta."
    chars = w.doc_chars.tolist()
    assert chars[:w.doc_start] == [-1] * 7 and chars[-1] == -1
    assert chars[w.doc_start:w.doc_start + 2] == [-1, -1] and chars[w.doc_start + 2] == 0
    assert all(doc[c] == chr(i) for i, c in zip(ids, chars) if c >= 0)
    assert (w.answer_type, text(ids[w.start:w.end + 1])) == (AnswerType.MINIMAL, "delta")
    assert segment_ids(w.doc_start, len(ids)).tolist() == [0] * 7 + [1] * (len(ids) - 7)
    assert counts == Counter({("examples", "windowed"): 1, ("labels", "MINIMAL"): 1, ("windows", "MINIMAL"): 1})


def test_multibyte_document_maps_back_to_its_characters_and_bytes():
    """A document of 2-, 3- and 4-byte characters read from the official format: the minimal
    answer's doc_chars are exactly its codepoints, and to_bytes gives the file's bytes."""
    doc = "Привет мир. 日本語の文章です。😀 ক তেলেগు ทดสอบ"
    b = lambda i: len(doc[:i].encode("utf-8"))  # noqa: E731
    p0, p1 = (0, 11), (12, len(doc))
    ans = (doc.index("文章"), doc.index("文章") + 2)
    record = {"example_id": 5, "language": "japanese", "question_text": "何?", "document_plaintext": doc,
              "passage_answer_candidates": [{"plaintext_start_byte": b(s), "plaintext_end_byte": b(e)}
                                            for s, e in (p0, p1)],
              "annotations": [{"passage_answer": {"candidate_index": 1}, "yes_no_answer": "NONE",
                               "minimal_answer": {"plaintext_start_byte": b(ans[0]), "plaintext_end_byte": b(ans[1])}}]}
    ex = parse_example(record)
    [w] = window_example(ex, WindowSettings(), training=True, counts=Counter())
    chars = w.doc_chars[w.start:w.end + 1]
    assert (int(chars[0]), int(chars[-1]) + 1) == ex.annotations[0].minimal == ans
    assert text(w.input_ids[w.start:w.end + 1]) == "文章"
    from contract.tydiqa import to_bytes
    assert to_bytes(ex, int(chars[0]), int(chars[-1]) + 1) == (b(ans[0]), b(ans[1]))


def test_spans_follow_googles_loop():
    assert spans(0, 10, 4) == []
    assert spans(10, 10, 4) == [(0, 10)]
    assert spans(11, 10, 4) == [(0, 10), (4, 7)]  # the last one reaches the end
    assert spans(30, 10, 4) == [(0, 10), (4, 10), (8, 10), (12, 10), (16, 10), (20, 10)]
    assert spans(5, 2, 4) == [(0, 2), (2, 2), (4, 1)]  # a stride past the window: min(length, stride)


def long_example(answer_at: int, length: int = 5, n: int = 60):
    doc = "".join(chr(ord("a") + i % 26) for i in range(n))
    return example(doc, [(0, n)], [Annotation(0, (answer_at, answer_at + length), "NONE")], question="abc")


def test_stride_overlap_and_an_answer_at_a_windows_edge():
    # SMALL: prefix CLS [Q] a b c SEP = 6 positions, room 32 - 6 - 1 = 25 contexts positions a
    # window; contexts = M0 ' ' + 60 characters = 62 positions; windows start 0, 8, 16, 24, 32, 40.
    counts = Counter()
    rows = window_example(long_example(answer_at=23 - 2, length=2), SMALL, training=False, counts=counts)
    assert [w.window for w in rows] == list(range(6))
    for a, b in zip(rows, rows[1:]):  # consecutive windows overlap by room - stride = 17 positions
        assert a.input_ids[a.doc_start + 8:-1].tolist()[:17] == b.input_ids[b.doc_start:-1].tolist()[:17]
    # the answer's contexts positions are 23 and 24: the last two of window 0, inside windows 1 and 2
    first, second = rows[0], rows[1]
    assert (first.answer_type, first.start, first.end) == (AnswerType.MINIMAL, 6 + 23, 6 + 24)
    assert first.end == len(first.input_ids) - 2  # right before the final SEP
    assert (second.answer_type, second.start, second.end) == (AnswerType.MINIMAL, 6 + 15, 6 + 16)
    # one character further and window 0 no longer holds the whole span
    shifted = window_example(long_example(answer_at=22, length=2), SMALL, training=False, counts=Counter())
    assert (shifted[0].answer_type, shifted[0].start, shifted[0].end) == (AnswerType.UNKNOWN, 0, 0)
    assert counts["windows", "MINIMAL"] == 3 and counts["windows", "UNKNOWN"] == 3


def test_training_drops_windows_without_the_answer_and_counts_them():
    counts = Counter()
    rows = window_example(long_example(answer_at=40, length=3), SMALL, training=True, counts=counts)
    # contexts positions 42..44: in the windows starting at 24, 32 and 40
    assert [w.window for w in rows] == [3, 4, 5] and all(w.answer_type == AnswerType.MINIMAL for w in rows)
    for w in rows:
        assert w.doc_chars[w.start] == 40 and w.doc_chars[w.end] == 42
    assert counts["dropped", "no_answer_in_window"] == 3 and counts["windows", "MINIMAL"] == 3


def test_the_question_keeps_its_last_characters():
    ex = long_example(answer_at=0)
    ex.question = "0123456789"
    [w, *_] = window_example(ex, SMALL, training=False, counts=Counter())
    assert text(w.input_ids[2:w.doc_start - 1]) == "6789" and w.doc_start == 7
    assert len(w.input_ids) == SMALL.max_length


def test_passage_only_and_yes_no_span_the_passage():
    doc = "first passage. second passage here."
    passages = [(0, 14), (15, len(doc))]
    for yes_no, kind in (("NONE", AnswerType.PASSAGE), ("YES", AnswerType.YES), ("NO", AnswerType.NO)):
        counts = Counter()
        [w] = window_example(example(doc, passages, [Annotation(1, None, yes_no)]), WindowSettings(), True, counts)
        assert w.answer_type == kind and text(w.input_ids[w.start:w.end + 1]) == "second passage here."
        assert (w.doc_chars[w.start], w.doc_chars[w.end]) == (15, len(doc) - 1)
        assert counts["labels", kind.name] == 1


def test_first_annotation_prefers_a_minimal_answer_then_the_earliest_passage():
    doc = "aaaa bbbb cccc"
    ex = example(doc, [(0, 4), (5, 9), (10, 14)],
                 [Annotation(-1, None, "NONE"), Annotation(2, (10, 12), "NONE"), Annotation(1, None, "YES")])
    assert first_annotation(ex, 45).passage == 2  # a minimal answer wins over an earlier passage
    assert first_annotation(ex, 2).passage == 1  # ... unless its passage is not kept
    ex.annotations = [Annotation(2, None, "NONE"), Annotation(1, None, "NONE")]
    assert first_annotation(ex, 45).passage == 1
    assert first_annotation(ex, 1) is None


def test_an_answer_past_max_passages_is_lost_and_counted():
    doc = "aaaa bbbb cccc"
    ex = example(doc, [(0, 4), (5, 9), (10, 14)], [Annotation(2, (10, 12), "NONE")])
    counts = Counter()
    rows = window_example(ex, WindowSettings(max_passages=2, include_unknowns=1.0), True, counts)
    assert [w.answer_type for w in rows] == [AnswerType.UNKNOWN]
    assert text(rows[0].input_ids).count("c") == 0  # the third passage is not read
    assert counts["answers_lost", "beyond_max_passages"] == 1 and counts["labels", "UNKNOWN"] == 1


def test_rejections_are_counted_by_reason():
    s, counts = WindowSettings(), Counter()
    assert window_example(example("abc", []), s, True, counts) == []
    assert window_example(example("abc", [(0, 0), (0, 3)]), s, True, counts) == []
    assert window_example(example("abc def", [(0, 3)], [Annotation(0, (1, 1), "NONE")]), s, True, counts) == []
    assert window_example(example("abc def", [(0, 3)], [Annotation(0, (2, 6), "NONE")]), s, True, counts) == []
    # prediction keeps every window of such an example, its label UNKNOWN
    assert len(window_example(example("abc def", [(0, 3)], [Annotation(0, (2, 6), "NONE")]), s, False, counts)) == 1
    bad = {"example_id": 9, "language": "english", "question_text": "q", "document_plaintext": "é",
           "passage_answer_candidates": [{"plaintext_start_byte": 0, "plaintext_end_byte": 1}], "annotations": []}
    assert window_line(json.dumps(bad), s, True, counts) == [] and window_line("  \n", s, True, counts) == []
    assert {k: v for k, v in counts.items() if k[0] in ("rejected", "labels_unusable", "examples")} == {
        ("rejected", "no_passages"): 1, ("rejected", "empty_passage"): 1, ("rejected", "empty_minimal_answer"): 1,
        ("rejected", "minimal_outside_passage"): 1, ("rejected", "offset_inside_character"): 1,
        ("labels_unusable", "minimal_outside_passage"): 1, ("examples", "read"): 1, ("examples", "windowed"): 1}
    with pytest.raises(InputError, match="f.jsonl:3: not JSON"):
        window_line("{", s, True, counts, where="f.jsonl:3")


def test_aliased_characters_are_replaced_and_counted():
    doc = "a\ue001b\x00c"
    counts = Counter()
    [w] = window_example(example(doc, [(0, 5)], question="\ue005?"), WindowSettings(), False, counts)
    assert text(w.input_ids[w.doc_start + 2:-1]) == "a\ufffdb\ufffdc" and w.input_ids[2] == schema.REPLACEMENT_CHARACTER
    assert counts["characters", "replaced"] == 3 and w.doc_chars[w.doc_start + 3] == 1


def test_unknown_windows_are_drawn_by_hash_at_the_stated_rate():
    """An UNKNOWN example's windows: kept where tydi_window_draw(seed, id, window) < 0.1, the same
    on every call (no process state), about 10% of 3,680 windows, another seed other windows."""
    s = WindowSettings(max_length=32, stride=8, max_question=4)
    doc = "x" * 200  # contexts M0 ' ' x*200: 202 positions, 26 a window (prefix CLS [Q] q ? SEP): 23 windows
    kept, total = set(), 0
    for example_id in range(160):
        counts = Counter()
        rows = window_example(example(doc, [(0, 200)], example_id=example_id), s, True, counts)
        again = window_example(example(doc, [(0, 200)], example_id=example_id), s, True, Counter())
        assert [w.window for w in rows] == [w.window for w in again]
        assert all((w.answer_type, w.start, w.end) == (AnswerType.UNKNOWN, 0, 0) for w in rows)
        n = counts["windows", "UNKNOWN"] + counts["dropped", "unknown_example"]
        total += n
        kept |= {(example_id, w.window) for w in rows}
        assert {w.window for w in rows} == {i for i in range(n) if seeds.tydi_window_draw(0, example_id, i) < 0.1}
    assert total == 160 * len(spans(202, 26, 8)) == 3680 and 0.085 < len(kept) / total < 0.115
    other = {(e, w.window) for e in range(160)
             for w in window_example(example(doc, [(0, 200)], example_id=e), WindowSettings(
                 max_length=32, stride=8, max_question=4, seed=1), True, Counter())}
    assert other != kept
    assert seeds.tydi_window_draw(0, 7, 3) == pytest.approx(seeds.tydi_window_draw(0, 7, 3))  # a pure function


def test_settings_are_checked():
    for bad in (dict(max_length=8, max_question=4), dict(stride=0), dict(include_unknowns=1.5), dict(max_passages=0),
                dict(max_passages=251)):
        with pytest.raises(ValueError):
            WindowSettings(**bad).validate()
    WindowSettings(max_passages=250).validate()


def test_tiny_dev_doc_chars_give_back_every_minimal_answer():
    """The official sample: in prediction mode every example's minimal answer (first annotation) is
    in some window, and doc_chars of its span are the Example's minimal chars exactly."""
    found = 0
    with gzip.open(TINY_DEV, "rt", encoding="utf-8") as f:
        for line in f:
            ex = parse_example(json.loads(line))
            a = first_annotation(ex, 45)
            rows = window_example(ex, WindowSettings(), training=False, counts=Counter())
            assert rows and all(len(w.input_ids) <= 2048 and len(w.input_ids) == len(w.doc_chars) for w in rows)
            for w in rows:
                chars = w.doc_chars[w.doc_start:-1]
                ids = w.input_ids[w.doc_start:-1]
                held = chars >= 0
                assert text(ids[held]) == "".join(ex.document[c] for c in chars[held])
            if a is not None and a.minimal is not None:
                hits = [w for w in rows if w.answer_type == AnswerType.MINIMAL]
                assert hits
                for w in hits:
                    assert (int(w.doc_chars[w.start]), int(w.doc_chars[w.end]) + 1) == a.minimal
                found += 1
    assert found == 4
    assert np.int32  # numpy is what the rows hold
