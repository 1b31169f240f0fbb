"""CANINE fine-tuned on TyDi QA, for transformers' `trust_remote_code`: answers a question on a raw document.

canine-pretrain copies this file into an export of a TyDi QA model as modeling_canine_tydiqa.py
(training/hf.py `export_question_answerer`); config.json's `auto_map` points
`AutoModelForQuestionAnswering` at `CanineForTydiQuestionAnswering` below:

    from transformers import AutoModelForQuestionAnswering
    model = AutoModelForQuestionAnswering.from_pretrained(PATH, trust_remote_code=True)
    model.answer("Where does Ana live?", open("document.txt").read())
    # {"answer": "New York", "start": 13, "end": 21, "score": 4.2, "type": "minimal",
    #  "passage": (0, 22)}      start / end / passage: character offsets into the document

The model is transformers' CanineForQuestionAnswering (`canine.*` the encoder, `qa_outputs` the
start / end layer) plus Google's TyDi QA answer-type layer over the pooled output
(`answer_type_output`, five types: null, yes, no, minimal, passage). Its weights are all in
model.safetensors: transformers' own CanineForQuestionAnswering loads the export too, with the
answer-type layer's two tensors left over, and gives the same start and end logits.

`answer` reads a document as Google's TyDi QA code does (google-research/language,
language/canine/tydiqa: preproc.py, postproc.py, the settings of its README's commands): the document is
cut into passages at line breaks (TyDi's passage candidates are its paragraphs), at most
`max_passages` of them, each preceded by its marker character U+E006 + i and joined by spaces;
the question's last `max_question_length` characters follow [CLS] and [Q] (U+E005), then [SEP],
a window of the passages, [SEP]; windows of `max_length` characters start every `stride`
characters of the passages (a short document is one window). The answer is the best span over
the windows by Google's rule (postproc.compute_predictions: the top `beam` start and end
characters, end >= start, at most `max_answer_length` characters, scored against [CLS]), also
kept inside one passage. `type` is the answer-type layer's choice in that span's window: "yes" /
"no" answer the question by themselves, "minimal" says the span is the answer, "passage" that
its passage holds it without a short answer, "null" that the document does not answer it (the
span and its score are still given: TyDi QA's scoring thresholds the score). Each window is
padded by the few characters the encoder needs to read it as it reads it inside any longer batch
(`_padded_length`, canine-pretrain's downstream.min_padded_length).

It imports only torch and transformers, so it runs where canine-pretrain is not installed; so
the span rule, which canine-pretrain has in training/tydi_heads.py, is written again here.
"""

from __future__ import annotations  # `int | None` on Python 3.9, which transformers 4.x supports

import re
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CanineForQuestionAnswering
from transformers.modeling_outputs import QuestionAnsweringModelOutput

# CANINE's special codepoints (CanineTokenizer's) and TyDi QA's (Google's char_splitter.py: the
# first private-use codepoints after CANINE's own).
CLS, SEP, QUESTION = 0xE000, 0xE001, 0xE005
PASSAGE_0 = 0xE006  # passage i's marker is PASSAGE_0 + i
ANSWER_TYPES = ("null", "yes", "no", "minimal", "passage")  # Google's data.AnswerType (UNKNOWN = null)
PADDING_LOGIT = -10000.0  # start / end logits at padding (canine-pretrain's downstream.PADDING_LOGIT)
# The settings of Google's tydiqa README commands for CANINE (max_passages: prepare_tydi_data.py's
# default); config.json's `tydiqa` overrides them, `answer(..., setting=value)` both.
DEFAULTS = {"max_length": 2048, "stride": 512, "max_question_length": 256, "max_passages": 45,
            "max_answer_length": 100, "beam": 30}


@dataclass
class TydiQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """transformers' QuestionAnsweringModelOutput plus the answer-type logits (B, 5)."""

    answer_type_logits: torch.FloatTensor | None = None


class CanineForTydiQuestionAnswering(CanineForQuestionAnswering):
    """transformers' CanineForQuestionAnswering with Google's TyDi QA answer-type layer
    (`answer_type_output`, over the pooled output) and `answer(question, document)`."""

    def __init__(self, config):
        super().__init__(config)
        self.answer_type_output = nn.Linear(config.hidden_size, len(ANSWER_TYPES))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, start_positions=None, end_positions=None, answer_types=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        """Start and end logits (B, L), PADDING_LOGIT where attention_mask is 0, and the
        answer-type logits (B, 5). With start_positions, end_positions and answer_types (B,), the
        loss is TyDi QA's: the mean of the three cross-entropies."""
        outputs = self.canine(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              position_ids=position_ids, inputs_embeds=inputs_embeds,
                              output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                              return_dict=True)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(-1)  # (B, L) each
        if attention_mask is not None:
            padding = ~attention_mask.bool()
            start_logits = start_logits.masked_fill(padding, PADDING_LOGIT)
            end_logits = end_logits.masked_fill(padding, PADDING_LOGIT)
        type_logits = self.answer_type_output(outputs.pooler_output)  # (B, 5)
        loss = None
        if start_positions is not None and end_positions is not None and answer_types is not None:
            loss = (F.cross_entropy(start_logits.float(), start_positions)
                    + F.cross_entropy(end_logits.float(), end_positions)
                    + F.cross_entropy(type_logits.float(), answer_types)) / 3
        output = TydiQuestionAnsweringOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                             hidden_states=outputs.hidden_states, attentions=outputs.attentions,
                                             answer_type_logits=type_logits)
        return output if return_dict is not False else output.to_tuple()

    @torch.no_grad()
    def answer(self, question: str, document: str, batch_size: int = 8, **settings) -> dict:
        """The answer to `question` in `document` (raw text): {"answer": the span's text,
        "start", "end": its character offsets in `document` (end exclusive), "score": the span's
        score against [CLS], "type": "minimal" | "passage" | "yes" | "no" | "null", "passage":
        (start, end) of the passage holding it}, as the module docstring describes. With no span
        to give (an empty document), "answer" is "" and start, end, score and passage are None.
        `settings` override config.json's `tydiqa` (DEFAULTS): max_length, stride,
        max_question_length, max_passages, max_answer_length, beam. `batch_size` windows are
        read at once."""
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"answer: no setting {', '.join(sorted(unknown))}; it takes {', '.join(DEFAULTS)}")
        s = {**DEFAULTS, **(getattr(self.config, "tydiqa", None) or {}), **settings}
        max_length = min(int(s["max_length"]), self.config.max_position_embeddings)
        passages, rows = windows(question, document, max_length, int(s["stride"]), int(s["max_question_length"]),
                                 int(s["max_passages"]))
        best = None  # (score, start, end, type, passage index)
        for first in range(0, len(rows), batch_size):
            chunk = rows[first: first + batch_size]
            L = max(self._padded_length(len(row.input_ids)) for row in chunk)

            def padded(values, fill):
                return torch.tensor([v + [fill] * (L - len(v)) for v in values], device=self.device)

            input_ids = padded([row.input_ids for row in chunk], 0)
            out = self(input_ids=input_ids, attention_mask=(input_ids != 0).long(),
                       token_type_ids=padded([row.token_type_ids for row in chunk], 0))
            offsets = padded([row.offsets for row in chunk], -1)  # (B, L) document character, -1 where none
            passage_of = padded([row.passages for row in chunk], -1)  # (B, L)
            for r in range(len(chunk)):
                found = best_span(out.start_logits[r].float(), out.end_logits[r].float(), offsets[r] >= 0,
                                  int(s["max_answer_length"]), int(s["beam"]), passage_of[r])
                if found is not None and (best is None or found[0] > best[0]):  # the first best window wins
                    _, i, j = found
                    best = (found[0], int(offsets[r, i]), int(offsets[r, j]) + 1,
                            ANSWER_TYPES[int(out.answer_type_logits[r].argmax())], int(passage_of[r, i]))
        if best is None:
            return {"answer": "", "start": None, "end": None, "score": None, "type": "null", "passage": None}
        score, start, end, kind, i = best
        return {"answer": document[start:end], "start": start, "end": end, "score": score, "type": kind,
                "passage": passages[i]}

    def _padded_length(self, length: int) -> int:
        """canine-pretrain's downstream.min_padded_length (read there why): the padding after a
        window of `length` characters from which its encoding no longer depends on the padding."""
        c = self.config
        r, S = c.downsampling_rate, c.local_transformer_stride
        right = (c.upsampling_kernel_size - 1) - (c.upsampling_kernel_size - 1) // 2
        reach = (length - 1 + right) // r
        needed, last = r * (reach + 2), r * (reach + 1) - 1
        if last // S > (length - 1) // S:
            needed = max(needed, S * (last // S + 1))
        return min(needed, c.max_position_embeddings)


class Window(NamedTuple):
    """One window of a question on a document, as the model reads it (unpadded), and where its
    characters come from: `offsets` the document character at each position, `passages` its
    passage's index (-1 for both at [CLS], the question, a separator, a marker or a space
    joining passages)."""

    input_ids: list[int]
    token_type_ids: list[int]  # 0 for [CLS] [Q] question [SEP], 1 for the passages and the last [SEP]
    offsets: list[int]
    passages: list[int]


def windows(question: str, document: str, max_length: int = DEFAULTS["max_length"],
            stride: int = DEFAULTS["stride"], max_question_length: int = DEFAULTS["max_question_length"],
            max_passages: int = DEFAULTS["max_passages"]) -> tuple[list[tuple[int, int]], list[Window]]:
    """(the passages read, the windows) of `question` on raw `document` as Google's preproc.py
    builds them (the module docstring): [CLS] [Q] the question's last `max_question_length`
    characters [SEP], then up to `max_length` minus those characters and the last [SEP] of the
    passages' text, each passage after its marker and a space, passages joined by a space; a
    window starts every `stride` characters of that text until one reaches its end. These are
    the rows canine-pretrain trains on (its pipeline/downstream/windows.py, with this
    document's lines as the passage candidates; tests/training/test_hf_qa.py compares them)."""
    passages = split_passages(document)[:max_passages]
    text, offsets, passage_of = [], [], []  # the passages' text with markers and spaces
    for i, (lo, hi) in enumerate(passages):
        if i:
            text.append(ord(" "))
            offsets.append(-1)
            passage_of.append(-1)
        text += [PASSAGE_0 + i, ord(" "), *_codepoints(document[lo:hi])]
        offsets += [-1, -1, *range(lo, hi)]
        passage_of += [-1, -1] + [i] * (hi - lo)
    kept = question[max(0, len(question) - max_question_length):]  # its last characters
    head = [CLS, QUESTION, *_codepoints(kept), SEP]
    room = max_length - len(head) - 1  # characters of the passages' text per window
    if room < 1:
        raise ValueError(f"max_length {max_length} leaves no room for the document after the question")
    rows, begin = [], 0
    while begin < len(text):  # preproc.convert_single_example's windows
        n = min(len(text) - begin, room)
        rows.append(Window(head + text[begin: begin + n] + [SEP], [0] * len(head) + [1] * (n + 1),
                           [-1] * len(head) + offsets[begin: begin + n] + [-1],
                           [-1] * len(head) + passage_of[begin: begin + n] + [-1]))
        if begin + n == len(text):
            break
        begin += min(n, stride)
    return passages, rows


def _codepoints(text: str) -> list[int]:
    """The text's codepoints, U+0000 and the private-use range U+E000..U+E0FF as U+FFFD: none of
    them may pass for padding, [CLS], [SEP], [Q] or a passage marker (the training windows and
    the pretraining text were cleaned so)."""
    return [0xFFFD if c == 0 or 0xE000 <= c <= 0xE0FF else c for c in map(ord, text)]


def split_passages(document: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the document's passages: its lines (TyDi QA's passage
    candidates are paragraphs, one a line of document_plaintext) without their surrounding
    whitespace; blank lines are none."""
    return [(m.start(), m.end()) for m in re.finditer(r"[^\s](?:[^\n]*[^\s])?", document)]


def best_span(start_logits, end_logits, doc_mask, max_answer_length: int, beam: int, passage_ids=None):
    """(score, start, end) of one window's best span, `end` inclusive, or None: Google's rule
    (postproc.compute_predictions), as canine-pretrain's tydi_heads.best_spans has it. Candidates:
    the `beam` highest start and end logits of positions 1.. (equal logits by position), pairs of
    document characters with end >= start, at most `max_answer_length` characters, in one passage
    when `passage_ids` is given; score start + end - (start[0] + end[0]); the first best pair in
    start-major order wins."""
    starts = _top(start_logits, beam)
    ends = _top(end_logits, beam)
    s, e = starts[:, None], ends[None, :]
    valid = doc_mask[s] & doc_mask[e] & (e >= s) & (e - s + 1 <= max_answer_length)
    if passage_ids is not None:
        valid &= passage_ids[s] == passage_ids[e]
    if not valid.any():
        return None
    scores = torch.where(valid, start_logits.double()[s] + end_logits.double()[e], -torch.inf)
    flat = int(torch.argmax(scores))  # the first maximum of the flattened (start, end) grid
    i, j = divmod(flat, scores.shape[1])
    null = float(start_logits[0]) + float(end_logits[0])
    return float(scores[i, j]) - null, int(starts[i]), int(ends[j])


def _top(logits, beam: int):
    """Positions 1.. of the `beam` highest logits, highest first, equal logits by position."""
    order = torch.sort(logits[1:].double(), descending=True, stable=True).indices[:beam]
    return order + 1
