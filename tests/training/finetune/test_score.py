"""training/finetune/score.py: seqeval's entity counts give conlleval.pl's own figures, on a file of
every edge case and in unit cases."""

import pytest

from training.conll import to_iob2
from training.finetune.score import format_scores, score, score_by_language

# token gold predicted, as conlleval reads it. Each sentence is an edge case:
EDGE = """Anna B-PER B-PER
met O O
Bob B-PER B-PER

He O O
saw O O
New I-LOC I-LOC
York I-LOC I-LOC

Rome I-LOC I-LOC
fell O O

Carl B-PER B-PER
Dana B-PER I-PER
and O O
Eve I-PER I-PER
Finn B-PER B-PER

Gus B-PER B-PER
Paris I-LOC I-PER
today O O

The O O
UN B-ORG B-LOC
and O O
World B-ORG B-ORG
Bank I-ORG O

nothing O O
here O O

Monday O B-MISC
came O O
Lima B-LOC O

Acme B-ORG B-ORG
Corp I-ORG I-ORG
sold O I-ORG
"""
# 1: entities at a sentence's end, right. 2: I- without B- (IOB1), ending a sentence, right. 3: the next
# sentence starts with I-LOC: a new entity, the blank line ends the last one. 4: adjacent entities of one
# type with B- (Carl, Dana), predicted as one; I-PER after O (Eve) starts one. 5: an I- of another type
# after B- (Paris: a LOC of its own in gold; I-PER in the prediction continues Gus). 6: a wrong type (UN)
# and a wrong boundary (World Bank). 7: a sentence with no entity. 8: a predicted entity where gold has
# none (Monday) and a missed one (Lima). 9: a predicted entity running one word too far.

# What conlleval.pl printed for EDGE (`perl conlleval.pl < edge.txt`): the CoNLL-2000 shared task's
# script, version 2004-01-26, as kept in github.com/kyzhouhzau/BERT-NER, conlleval.pl at commit
# 0f77e478872453df51cd3c65d1a39b12d9617f9d (blob d7d67ff054ab0408eee11a3769dd31c694da7e7a).
CONLLEVAL = """\
processed 30 tokens with 14 phrases; found: 12 phrases; correct: 6.
accuracy:  76.67%; precision:  50.00%; recall:  42.86%; FB1:  46.15
              LOC: precision:  66.67%; recall:  50.00%; FB1:  57.14  3
             MISC: precision:   0.00%; recall:   0.00%; FB1:   0.00  1
              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  2
              PER: precision:  66.67%; recall:  57.14%; FB1:  61.54  6
"""
# The same figures as numbers: (precision, recall, FB1, found) per type, in percent to 2 decimals.
CONLLEVAL_OVERALL = {"tokens": 30, "gold": 14, "found": 12, "correct": 6,
                     "accuracy": "76.67", "precision": "50.00", "recall": "42.86", "f1": "46.15"}
CONLLEVAL_TYPES = {"LOC": ("66.67", "50.00", "57.14", 3), "MISC": ("0.00", "0.00", "0.00", 1),
                   "ORG": ("0.00", "0.00", "0.00", 2), "PER": ("66.67", "57.14", "61.54", 6)}


def columns(text):
    """(gold, predicted): the sentences of a conlleval input, as lists of tags."""
    gold, predicted = [], []
    for block in text.strip().split("\n\n"):
        rows = [line.split() for line in block.splitlines()]
        gold.append([r[-2] for r in rows])
        predicted.append([r[-1] for r in rows])
    return gold, predicted


def pct(x):
    return f"{100 * x:.2f}"


def test_the_figures_are_conllevals():
    s = score(*columns(EDGE))
    assert (s["tokens"], s["gold_entities"], s["predicted_entities"], s["correct"]) == (30, 14, 12, 6)
    assert {k: pct(s[k]) for k in ("precision", "recall", "f1")} == {
        k: CONLLEVAL_OVERALL[k] for k in ("precision", "recall", "f1")}
    assert pct(s["token_accuracy"]) == CONLLEVAL_OVERALL["accuracy"]
    assert {t: (pct(v["precision"]), pct(v["recall"]), pct(v["f1"]), v["predicted"])
            for t, v in s["types"].items()} == CONLLEVAL_TYPES
    assert {t: (v["gold"], v["correct"]) for t, v in s["types"].items()} == {
        "LOC": (4, 2), "MISC": (0, 0), "ORG": (3, 0), "PER": (7, 4)}


def test_the_printed_lines_are_conllevals():
    lines = format_scores(score(*columns(EDGE)), "edge")
    assert lines == ["edge: " + CONLLEVAL.splitlines()[0], *CONLLEVAL.splitlines()[1:]]


def test_seqevals_strict_mode_is_not_conllevals():
    """Why score() uses seqeval's default mode: the strict IOB2 one drops entities that start with
    I- (here Rome, New York, Eve), so it gives another F1 than conlleval on this file."""
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    gold, predicted = columns(EDGE)
    assert pct(f1_score(gold, predicted)) == CONLLEVAL_OVERALL["f1"]
    assert pct(f1_score(gold, predicted, mode="strict", scheme=IOB2)) != CONLLEVAL_OVERALL["f1"]


def test_iob1_and_its_iob2_score_alike():
    gold, predicted = columns(EDGE)
    assert score([to_iob2(g) for g in gold], [to_iob2(p) for p in predicted]) == score(gold, predicted)


def test_perfect_and_empty_predictions():
    gold = [["B-PER", "I-PER", "O"], ["I-LOC"]]
    perfect = score(gold, gold)
    assert (perfect["precision"], perfect["recall"], perfect["f1"], perfect["token_accuracy"]) == (1.0, 1.0, 1.0, 1.0)
    nothing = score(gold, [["O"] * 3, ["O"]])  # no prediction: precision's denominator is 0
    assert (nothing["precision"], nothing["recall"], nothing["f1"], nothing["predicted_entities"]) == (0.0, 0.0, 0.0, 0)
    assert nothing["token_accuracy"] == 0.25
    assert nothing["types"]["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "gold": 1, "predicted": 0,
                                       "correct": 0}
    none_at_all = score([["O"]], [["O"]])
    assert (none_at_all["f1"], none_at_all["gold_entities"], none_at_all["types"]) == (0.0, 0, {})
    empty = score([], [])
    assert (empty["tokens"], empty["token_accuracy"], empty["f1"]) == (0, 0.0, 0.0)


def test_entities_never_cross_a_sentence_end():
    s = score([["B-PER"], ["I-PER"]], [["B-PER", ], ["I-PER"]])
    assert (s["gold_entities"], s["correct"]) == (2, 2)
    joined = score([["B-PER", "I-PER"]], [["B-PER", "I-PER"]])
    assert joined["gold_entities"] == 1


def test_shapes_must_match():
    with pytest.raises(ValueError, match="2 gold sentences, 1 predicted"):
        score([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold tags, 1 predicted"):
        score([["O"], ["O", "O"]], [["O"], ["O"]])


def test_by_language_pools_micro():
    gold = {"swa": [["B-PER", "O"]], "yor": [["B-LOC", "B-LOC", "B-LOC"]]}
    predicted = {"swa": [["B-PER", "O"]], "yor": [["O", "O", "O"]]}
    s = score_by_language(gold, predicted)
    assert list(s["languages"]) == ["swa", "yor"]
    assert s["languages"]["swa"]["f1"] == 1.0 and s["languages"]["yor"]["recall"] == 0.0
    # Micro: 1 of 4 gold entities found (a macro average of recalls would say 0.5).
    assert (s["overall"]["recall"], s["overall"]["precision"], s["overall"]["gold_entities"]) == (0.25, 1.0, 4)
    lines = format_scores(s, "test")
    assert lines[0] == "test: processed 5 tokens with 4 phrases; found: 1 phrases; correct: 1."
    assert lines[-2:] == ["              swa: precision: 100.00%; recall: 100.00%; FB1: 100.00  (1 gold, 1 found)",
                          "              yor: precision:   0.00%; recall:   0.00%; FB1:   0.00  (3 gold, 0 found)"]
    with pytest.raises(ValueError, match="differ"):
        score_by_language(gold, {"swa": predicted["swa"]})
