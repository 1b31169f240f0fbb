"""Downstream heads (paper §4): the encoder fine-tuned on a task, beside the pretraining heads
(heads.py). Architecture only: no Ray, no DeepSpeed.

Token classification (NER as character-level sequence labelling, paper §4, Tables 3-4): dropout
then one linear layer over every character's final encoding y_seq, as BERT's and Hugging Face's
CanineForTokenClassification do (same module names, so the export is a copy: training/hf.py).
Which characters carry which label is training/conll.py's.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from training import flops
from training.canine_config import CanineConfig
from training.kernels import Dropout, Linear
from training.model import CanineModel, init_weights

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
