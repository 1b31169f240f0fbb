"""TyDi QA's prediction rule: the best span of one window's start / end logits.

    from training.tydi_heads import best_spans
    found = best_spans(start_logits, end_logits, doc_mask)   # one window's (L,) arrays
    if found is not None:
        score, start, end = found                            # window positions, `end` inclusive

The rule is Google's (google-research/language, language/canine/tydiqa/postproc.py
`compute_predictions` and `get_best_indexes`): candidate starts are the `beam` highest start
logits and candidate ends the `beam` highest end logits, both over every position but 0 (the
[CLS], which stands for "no answer here"); a pair counts if both ends are document characters,
end >= start and the span is at most `max_answer_length` characters; its score is
start_logit[s] + end_logit[e] - (start_logit[0] + end_logit[0]), the span against [CLS]. The
candidates are chosen before the document filter, as Google's are, so a question character among
the top `beam` takes a candidate's place. Ties keep Google's order: candidates by logit, equal
logits by position (a stable sort), pairs start-major, and the first best pair wins. The
example's answer is the best-scoring span over its windows; tydi_eval.py then thresholds the
score (training/finetune/tydi_score.py).

numpy only, no torch needed (a torch tensor on the CPU is read as an array): it runs in the
driver, in a test, anywhere. training/hf_qa.py repeats this rule inside the export, which must
be self-contained (it is copied beside the weights and imports only torch and transformers).
"""

from __future__ import annotations

import numpy as np

from contract.tydiqa import AnswerType

# The answer-type head's logits, by index: contract/tydiqa.py AnswerType (Google's data.py
# numbering), lower-cased. An UNKNOWN window (no answer inside it) is labelled start = end = 0, [CLS].
ANSWER_TYPES = tuple(t.name.lower() for t in sorted(AnswerType))  # unknown, yes, no, minimal, passage

# Google's tydiqa README, its predict command for CANINE (run_tydi.py flags):
MAX_ANSWER_LENGTH = 100  # max_answer_length, characters (~99th percentile of answers, paper §4)
CANDIDATE_BEAM = 30  # candidate_beam: start and end candidates considered per window


def best_spans(start_logits, end_logits, doc_mask, max_answer_length: int = MAX_ANSWER_LENGTH,
               beam: int = CANDIDATE_BEAM, passage_ids=None):
    """The best span of one window, (score, start, end) with window positions (`end`
    inclusive), or None if no pair is valid (the module docstring's rule).

    start_logits, end_logits: (L,); doc_mask: (L,) bool, True at the document's characters (not
    [CLS], the question, a separator, a passage marker or padding). With (B, L) inputs, a list of
    B answers. `passage_ids` (L,) or (B, L), optional: the passage of each position; when given,
    both ends must lie in one passage (Google's rule does not ask it: a span across a marker is
    then put in passage 0 by its postproc, and gold minimal answers never cross one)."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    doc_mask = np.asarray(doc_mask, dtype=bool)
    if start_logits.ndim == 2:
        return [best_spans(s, e, m, max_answer_length, beam, None if passage_ids is None else p)
                for s, e, m, p in zip(start_logits, end_logits, doc_mask,
                                      passage_ids if passage_ids is not None else [None] * len(doc_mask))]
    if not start_logits.shape == end_logits.shape == doc_mask.shape or start_logits.ndim != 1:
        raise ValueError(f"best_spans needs (L,) or (B, L) arrays of one shape, got start {start_logits.shape}, "
                         f"end {end_logits.shape}, doc_mask {doc_mask.shape}")
    starts, ends = _top(start_logits, beam), _top(end_logits, beam)  # (k,) positions, best first
    s, e = starts[:, None], ends[None, :]  # (k, 1), (1, k): every pair
    valid = doc_mask[s] & doc_mask[e] & (e >= s) & (e - s + 1 <= max_answer_length)  # (k, k)
    if passage_ids is not None:
        passage_ids = np.asarray(passage_ids)
        valid &= passage_ids[s] == passage_ids[e]
    if not valid.any():
        return None
    null = float(start_logits[0]) + float(end_logits[0])
    scores = np.where(valid, start_logits[s].astype(np.float64) + end_logits[e], -np.inf)  # (k, k)
    i, j = np.unravel_index(np.argmax(scores), scores.shape)  # the first best, in start-major order
    return float(scores[i, j]) - null, int(starts[i]), int(ends[j])


def _top(logits: np.ndarray, beam: int) -> np.ndarray:
    """Positions 1.. of the `beam` highest logits, highest first, equal logits by position
    (get_best_indexes: Python's stable sort, reversed)."""
    order = np.argsort(-logits[1:].astype(np.float64), kind="stable")[:beam]
    return order + 1
