"""conlleval's figures for NER: entity-level precision, recall and micro F1, overall and per type.

    s = score(gold, predicted)            # lists of sentences of word tags
    s["f1"], s["types"]["PER"]["f1"]      # fractions, 0..1
    by_lang = score_by_language({"swa": gold_swa, ...}, {"swa": pred_swa, ...})
    print("\n".join(format_scores(by_lang, "test")))

The paper scores NER as conlleval does (the CANINE paper, §4; the CoNLL-2000 shared task's
conlleval.pl, version 2004-01-26): an entity is a chunk, and a predicted one counts only if its
type, first and last word all match a gold one. Chunks are read with conlleval's rules, in gold and
prediction alike: B-X starts one, and so does an I-X after O, after another type or at a sentence
start; a type change or O ends one. So IOB1 files (CoNLL 2003) and a model's invalid sequences
(I-PER after O) are scored as conlleval scores them.

The chunks come from seqeval (get_entities) in its default mode, which is conlleval's startOfChunk
and endOfChunk ported line by line. Its strict mode (mode="strict", scheme=IOB2) is not: it drops
an entity that does not start with B-, so on IOB1 or invalid sequences it counts fewer entities
than conlleval. tests/training/finetune/test_score.py holds conlleval.pl's own printed figures for
a file of every edge case and checks these equal them.

Percentages are printed as conlleval prints them (two decimals); the dict holds fractions, with 0.0
wherever a denominator is 0 (conlleval prints 0.00 there).
"""

from __future__ import annotations

from collections import Counter

from seqeval.metrics.sequence_labeling import get_entities


def _prf(correct: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _chunks(sentences: list[list[str]]) -> set[tuple[str, int, int]]:
    """(type, first, last) of every chunk, positions in the sentences laid end to end. seqeval puts
    an O between sentences, so no chunk crosses one (conlleval's blank line is O too)."""
    if not sentences:
        return set()
    return set(get_entities([list(s) for s in sentences]))


def score(gold: list[list[str]], predicted: list[list[str]]) -> dict:
    """conlleval's figures for word tags `predicted` against `gold`, sentence by sentence: the keys
    precision, recall, f1, gold_entities, predicted_entities, correct, tokens, token_accuracy and
    types: {TYPE: precision, recall, f1, gold, predicted, correct} for every type in either."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences, {len(predicted)} predicted")
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags, {len(p)} predicted")
    true, guessed = _chunks(gold), _chunks(predicted)
    hits = true & guessed
    count_true = Counter(t for t, _, _ in true)
    count_guessed = Counter(t for t, _, _ in guessed)
    count_hits = Counter(t for t, _, _ in hits)
    types = {}
    for t in sorted(count_true.keys() | count_guessed.keys()):
        p, r, f = _prf(count_hits[t], count_guessed[t], count_true[t])
        types[t] = {"precision": p, "recall": r, "f1": f,
                    "gold": count_true[t], "predicted": count_guessed[t], "correct": count_hits[t]}
    tokens = sum(len(g) for g in gold)
    # conlleval's accuracy: the share of tokens whose predicted tag is the gold tag, O included.
    same = sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p))
    precision, recall, f1 = _prf(len(hits), len(guessed), len(true))
    return {"precision": precision, "recall": recall, "f1": f1,
            "gold_entities": len(true), "predicted_entities": len(guessed), "correct": len(hits),
            "tokens": tokens, "token_accuracy": same / tokens if tokens else 0.0, "types": types}


def score_by_language(gold_by_lang: dict[str, list], predicted_by_lang: dict[str, list]) -> dict:
    """{"overall": the languages pooled (micro: every entity counts once, whatever its language),
    "languages": {lang: score}}, languages in gold_by_lang's order."""
    if gold_by_lang.keys() != predicted_by_lang.keys():
        raise ValueError(f"gold languages {sorted(gold_by_lang)} differ from predicted {sorted(predicted_by_lang)}")
    languages = {lang: score(gold_by_lang[lang], predicted_by_lang[lang]) for lang in gold_by_lang}
    pooled_gold = [s for lang in gold_by_lang for s in gold_by_lang[lang]]
    pooled_predicted = [s for lang in gold_by_lang for s in predicted_by_lang[lang]]
    return {"overall": score(pooled_gold, pooled_predicted), "languages": languages}


def _pct(x: float) -> str:
    return f"{100 * x:6.2f}"  # conlleval's printf "%6.2f"


def _block(s: dict, title: str) -> list[str]:
    lines = [f"{title}: processed {s['tokens']} tokens with {s['gold_entities']} phrases; "
             f"found: {s['predicted_entities']} phrases; correct: {s['correct']}.",
             f"accuracy: {_pct(s['token_accuracy'])}%; precision: {_pct(s['precision'])}%; "
             f"recall: {_pct(s['recall'])}%; FB1: {_pct(s['f1'])}"]
    for t, v in s["types"].items():
        lines.append(f"{t:>17}: precision: {_pct(v['precision'])}%; recall: {_pct(v['recall'])}%; "
                     f"FB1: {_pct(v['f1'])}  {v['predicted']}")  # conlleval ends a type's line with its found count
    return lines


def format_scores(scores: dict, title: str) -> list[str]:
    """Console lines in conlleval's layout: overall figures (percent, two decimals), then one line per
    type, then for score_by_language's result one line per language."""
    if "overall" not in scores:
        return _block(scores, title)
    lines = _block(scores["overall"], title)
    for lang, s in scores["languages"].items():
        lines.append(f"{lang:>17}: precision: {_pct(s['precision'])}%; recall: {_pct(s['recall'])}%; "
                     f"FB1: {_pct(s['f1'])}  ({s['gold_entities']} gold, {s['predicted_entities']} found)")
    return lines
