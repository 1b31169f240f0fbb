"""Downstream heads (paper §4): the encoder fine-tuned on a task, beside the pretraining heads
(heads.py). Architecture only: no Ray, no DeepSpeed.

Token classification (NER as character-level sequence labelling, paper §4, Tables 3-4): dropout
then one linear layer over every character's final encoding y_seq, as BERT's and Hugging Face's
CanineForTokenClassification do (same module names, so the export is a copy: training/hf.py).
Which characters carry which label is training/conll.py's.

TyDi QA (paper §4, the primary tasks SelectP and MinSpan): Google's model
(google-research/language, language/canine/tydiqa/tydi_modeling.py) reads start and end logits
from one linear layer [2, d] over every character's y_seq and an answer type
(contract/tydiqa.py AnswerType) from a linear layer [5, d] over the pooled output ([CLS]'s
molecule); its loss is the mean of the three cross-entropies. CanineForTydiQA below is that, with
transformers' CanineForQuestionAnswering's name for the span layer (qa_outputs), so the export is
a copy (training/hf.py export_question_answerer). Neither Google's nor transformers' model has a
dropout before these layers; this one has none either. Which window holds which answer, and the
best span of a window's logits, are the windowing's and tydi_heads.py's.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from training import flops
from training.canine_config import CanineConfig
from training.kernels import Dropout, Linear
from training.model import CanineModel, init_weights
from training.tydi_heads import ANSWER_TYPES

IGNORE = -100  # a label the loss skips (CLS, SEP, padding): torch's cross_entropy default ignore_index


class TokenClassifierOutput(NamedTuple):  # a tuple: wrappers (ZeRO-3's hooks) find the tensors in it
    loss_sum: torch.Tensor  # scalar: summed cross-entropy over the labelled characters (the loop scales it)
    correct: torch.Tensor  # labelled characters predicted right
    count: torch.Tensor  # labelled characters
    predictions: torch.Tensor  # (B, L) argmax label id of every character


class CanineForTokenClassification(nn.Module):
    """Encoder + dropout + linear classifier over characters."""

    def __init__(self, config: CanineConfig, num_labels: int):
        super().__init__()
        self.config, self.num_labels = config, num_labels
        self.encoder = CanineModel(config)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.classifier = Linear(config.hidden_size, num_labels)
        self.init_weights()

    def init_weights(self):
        self.encoder.init_weights()
        init_weights(self.classifier, self.config.initializer_range, "normal")  # BERT's N(0, 0.02) head

    def logits(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.dropout(out.sequence_output))  # (B, L, num_labels)

    def forward(self, batch: dict[str, torch.Tensor]) -> TokenClassifierOutput:
        """batch: input_ids, attention_mask (B, L); labels (B, L) with IGNORE where no label."""
        logits = self.logits(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        labels = batch["labels"]
        # fp32 softmax whatever the forward's precision (bf16 autocast): the sum runs over many characters
        loss_sum = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                                   reduction="sum")
        predictions = logits.argmax(-1)  # (B, L)
        labelled = labels != IGNORE
        return TokenClassifierOutput(loss_sum, (predictions == labels)[labelled].sum(), labelled.sum(), predictions)

    def num_flops_per_example(self, seq_len: int) -> int:
        """Forward + backward matmul FLOPs of encoder + classifier (training/flops.py's count)."""
        return flops.encoder_flops(self.config, seq_len, None) + 6 * seq_len * self.config.hidden_size * self.num_labels


def min_padded_length(config: CanineConfig, length: int) -> int:
    """The shortest padded length from which a window of `length` characters (CLS to the last
    SEP) gets the same encoding at its characters, and the same pooled output, at every longer
    padding (up to fp32 summation order); capped at max_position_embeddings. Pad each window of a
    batch to at least this (or every window to one fixed length, as Google's code pads to 2048) and
    its logits, loss and best span do not depend on the batch it is in.

    CANINE's encoding of a window depends on the padding after it, three ways (model.py): the
    downsampling drops the last molecule, so the one holding the last characters is dropped
    when the padding stops there; the upsampling conv reads `right` characters past each one
    (2 for a kernel of 4), and a character past the last molecule but one gets the last
    molecule repeated instead of its own; a padding character in a local-attention block without
    a real character attends uniformly over that block's padding, which the padded length
    changes. So the molecules up to the one holding character length - 1 + right must be there
    and not last, and that molecule's characters must sit in a block with a real character or in
    a complete one. The least such length: measured against the encoder for every length
    4..140 of the tiny size (tests/training/test_tydi_heads.py checks 4..72)."""
    r, S = config.downsampling_rate, config.local_transformer_stride
    right = (config.upsampling_kernel_size - 1) - (config.upsampling_kernel_size - 1) // 2
    reach = (length - 1 + right) // r  # the conv molecule holding the last character the conv reads
    needed = r * (reach + 2)  # that molecule kept, and not the last (whose repeats cover the remainder)
    last = r * (reach + 1) - 1  # the last character of that molecule
    if last // S > (length - 1) // S:  # its block has no real character: the whole block
        needed = max(needed, S * (last // S + 1))
    return min(needed, config.max_position_embeddings)


# Start / end logits at padding (attention_mask 0): exp(-1e4) is 0 in fp32, so padding gets no
# probability, while a CE against it stays finite (BERT's masking value).
PADDING_LOGIT = -10000.0


class QAOutput(NamedTuple):  # a tuple: wrappers (ZeRO-3's hooks) find the tensors in it
    loss_sum: torch.Tensor  # scalar: the sum over labelled windows of (start CE + end CE + type CE) / 3
    start_logits: torch.Tensor  # (B, L) float32, PADDING_LOGIT at padding
    end_logits: torch.Tensor  # (B, L) float32, PADDING_LOGIT at padding
    type_logits: torch.Tensor  # (B, len(ANSWER_TYPES)) float32
    count: torch.Tensor  # windows with labels (the loop divides loss_sum by their total)


class CanineForTydiQA(nn.Module):
    """Encoder + span layer over characters + answer-type layer over the pooled output
    (the module docstring: Google's TyDi QA model)."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        self.config = config
        self.encoder = CanineModel(config)
        self.qa_outputs = Linear(config.hidden_size, 2)  # start, end: transformers' CanineForQuestionAnswering's
        self.answer_type_output = Linear(config.hidden_size, len(ANSWER_TYPES))
        self.init_weights()

    def init_weights(self):
        self.encoder.init_weights()
        # Google's tf.truncated_normal_initializer(stddev=0.02) for both, zero biases
        for head in (self.qa_outputs, self.answer_type_output):
            init_weights(head, self.config.initializer_range, "original")

    def logits(self, input_ids, attention_mask=None, token_type_ids=None):
        """(start (B, L), end (B, L), answer type (B, len(ANSWER_TYPES))), float32.

        Padding's start and end logits are PADDING_LOGIT. Google's softmax runs over every
        position, padding too; there each window is padded to the same fixed length, so the
        padding is the same for all of them, but a batch padded to its longest window would give
        a window's padding a share of the probability that depends on its batch. Masked, a
        window's loss and best span depend on its own characters only (see min_padded_length for
        the encoder's side of that)."""
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        start, end = self.qa_outputs(out.sequence_output).float().unbind(-1)  # (B, L) each
        if attention_mask is not None:
            padding = ~attention_mask.bool()
            start, end = start.masked_fill(padding, PADDING_LOGIT), end.masked_fill(padding, PADDING_LOGIT)
        return start, end, self.answer_type_output(out.pooled_output).float()

    def forward(self, batch: dict[str, torch.Tensor]) -> QAOutput:
        """batch: input_ids, attention_mask, token_type_ids (B, L); when training also
        start_positions, end_positions and answer_types (B,) (IGNORE in answer_types: a window
        without a label, e.g. a row filling a fixed batch)."""
        start, end, types = self.logits(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        if "answer_types" not in batch:
            zero = start.new_zeros(())
            return QAOutput(zero, start, end, types, zero.long())
        labelled = batch["answer_types"] != IGNORE  # (B,)

        def ce(logits, target):  # fp32 (the logits are), per window, 0 where unlabelled
            return F.cross_entropy(logits, target.masked_fill(~labelled, IGNORE), ignore_index=IGNORE,
                                   reduction="none")

        per_window = (ce(start, batch["start_positions"]) + ce(end, batch["end_positions"])
                      + ce(types, batch["answer_types"])) / 3  # (B,)
        return QAOutput(per_window.sum(), start, end, types, labelled.sum())

    def num_flops_per_example(self, seq_len: int) -> int:
        """Forward + backward matmul FLOPs of encoder + span and answer-type layers (training/flops.py's count)."""
        d = self.config.hidden_size
        return flops.encoder_flops(self.config, seq_len, None) + 6 * seq_len * d * 2 + 6 * d * len(ANSWER_TYPES)
