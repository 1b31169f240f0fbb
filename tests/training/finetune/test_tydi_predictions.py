"""From the windows' best spans to one official prediction per example (training/finetune/tydi.py
predictions_of): the best window wins, its passage is the candidate holding the span (else 0, as
Google's postproc does), a YES/NO type answers yes/no with no span, an example with no span, or one
the reader rejected, gets a null line in its language; offsets are the document's UTF-8 bytes."""

import json

from contract.tydiqa import AnswerType
from training.finetune import tydi, tydi_score


def _record(example_id, language, document, passages, annotation=None):
    def span(a, b):
        return {"plaintext_start_byte": len(document[:a].encode()), "plaintext_end_byte": len(document[:b].encode())}

    none = {"passage_answer": {"candidate_index": -1}, "minimal_answer": {"plaintext_start_byte": -1,
            "plaintext_end_byte": -1}, "yes_no_answer": "NONE"}
    return {"example_id": example_id, "language": language, "question_text": "?", "document_plaintext": document,
            "document_url": "", "passage_answer_candidates": [span(a, b) for a, b in passages],
            "annotations": [annotation or none]}


def test_one_line_per_example_by_the_rules(tmp_path):
    doc = "Ελληνικά κείμενο.\nДругой абзац здесь.\n東京は首都です。"  # 2- and 3-byte characters
    passages = [(0, 17), (18, 37), (38, 46)]
    records = [_record(1, "russian", doc, passages), _record(2, "japanese", doc, passages),
               _record(3, "russian", doc, passages), _record(4, "thai", doc, passages)]
    bad = _record(5, "arabic", doc, passages)
    bad["passage_answer_candidates"][0]["plaintext_end_byte"] = 1  # inside 'Ε' (2 bytes): the reader rejects it
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [*records, bad]), encoding="utf-8")
    results = {  # row -> (example_id, language, (score, start_char, end_char) or None, type)
        0: (1, "russian", (1.5, 25, 30), AnswerType.MINIMAL),  # inside passage 1
        1: (1, "russian", (0.5, 0, 4), AnswerType.MINIMAL),  # a worse window of the same example
        2: (2, "japanese", (2.0, 15, 20), AnswerType.MINIMAL),  # across passages 0 and 1: candidate 0
        3: (3, "russian", (0.7, 38, 40), AnswerType.YES),  # the type head says yes
        4: (4, "thai", None, AnswerType.UNKNOWN),  # no valid span in any window
    }
    out = {p.example_id: p for p in tydi.predictions_of(results, [str(path)])}
    assert sorted(out) == [1, 2, 3, 4, 5]
    p = out[1]
    assert (p.passage_index, p.passage_score, p.minimal_score, p.yes_no) == (1, 1.5, 1.5, "none")
    assert p.minimal == (len(doc[:25].encode()), len(doc[:30].encode())) and doc[25:30] == "абзац"
    assert out[2].passage_index == 0 and out[2].minimal[1] > out[2].minimal[0]
    assert (out[3].yes_no, out[3].minimal, out[3].passage_index) == ("yes", (-1, -1), 2)
    for example_id, language in ((4, "thai"), (5, "arabic")):  # null lines, in their languages
        assert (out[example_id].passage_index, out[example_id].minimal, out[example_id].language) == \
            (-1, (-1, -1), language)
    # the official reader's checks accept every line
    written = tmp_path / "pred.jsonl"
    tydi.write_official(str(written), list(out.values()))
    assert len(tydi_score.read_predictions(str(written))) == 5


def test_thresholds_follow_the_annotators():
    three = {1: tydi_score.Gold(1, "thai", (tydi_score.Label(-1, (-1, -1), "none"),) * 3)}
    one = {1: tydi_score.Gold(1, "thai", (tydi_score.Label(-1, (-1, -1), "none"),))}
    assert tydi.thresholds(three) == (2, 2) and tydi.thresholds(one) == (1, 1)
