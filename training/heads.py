"""Pretraining heads (paper §3.2): CANINE-C's autoregressive character loss, CANINE-S's subword
loss, and an optional sentence-order loss on the pooled output. Nobody has published these
(docs/canine.md "Published code"); choices below say where they come from.

Both heads read fixed-size padded prediction arrays (320 / 80 slots with 0/1 weights, built by
training/batch.py), so every shape is static. The encoder computes its final layer only at those
slots (targeted upsampling, §3.2.3).
"""

from typing import NamedTuple

import torch
from torch import nn

from contract import schema
from training import flops
from training.canine_config import OBJECTIVES, CanineConfig
from training.kernels import Linear, linear, linear_cross_entropy
from training.model import CanineModel, TransformerLayer, activation, init_weights


class PretrainingOutput(NamedTuple):  # a tuple: wrappers (ZeRO-3's hooks) find the tensors in it
    loss: torch.Tensor  # scalar: objective loss + sop_loss_weight * sop_loss
    correct: torch.Tensor  # weighted count of correct objective predictions (for accuracy)
    count: torch.Tensor  # sum of the objective's weights (predictions that count)
    objective_loss: torch.Tensor  # weighted mean cross-entropy of the char / subword objective
    sop_loss: torch.Tensor | None = None
    sop_correct: torch.Tensor | None = None
    sop_count: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (B, P, classes) with forward(..., return_logits=True)


class Output(Linear):
    """A prediction layer: logits of `h`, or with targets, the weighted cross-entropy of those
    logits through `linear_cross_entropy` (chunked, never holding all of them), as
    (loss, correct, count)."""

    def forward(self, h, targets=None, weights=None):
        if targets is None:
            return linear(h, self.weight, self.bias)
        return linear_cross_entropy(h, self.weight, self.bias, targets, weights)


class Transform(nn.Module):
    """dense -> GELU -> LayerNorm (BERT's prediction-head transform)."""

    def __init__(self, config: CanineConfig, in_features: int):
        super().__init__()
        self.dense = Linear(in_features, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x):
        return self.norm(self.act(self.dense(x)))


class CharHead(nn.Module):
    """CANINE-C (§3.2.1): the predicted positions in a shuffled order, each step predicting its
    own character's bucket (codepoint % B) from its position's y_seq and the gold characters of
    the earlier steps (teacher forcing), through a small feed-forward net ([y ; gold embedding]
    -> d) and one transformer layer. Gold embeddings reuse the encoder's hash tables (before any
    factorized embedding's projection, so E wide).

    config.char_reveal (docs/pretraining.md has the comparison that chose the default):
    - "two_stream": step s contributes a key and value made from [y(p_s) ; e(g_s)], its position
      with its own character, visible only to later steps; the query of step t comes from
      [y(p_t) ; e(BOS)], its position with nothing revealed, which is also its one other key.
      A revealed character stays bound to its position (as XLNet's two streams).
    - "shifted": step t's row is [y(p_t) ; e(g_(t-1))] (BOS at step 0) under a causal mask, the
      paper's wording read literally: the character revealed at step t-1 reaches later steps
      attached to position p_t, not to p_(t-1) where it was."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        self.reveal = config.char_reveal
        # [y (d) ; gold embedding (E, the hash tables' width: d unless ALBERT-factorized)] -> d
        self.project = Transform(config, config.hidden_size + config.embedding_width)
        self.layer = TransformerLayer(config)
        self.output = Output(config.hidden_size, config.num_hash_buckets)

    def forward(self, y_steps, gold_steps, embed):
        """y_steps (B, P, d) and gold codepoints (B, P), both in step order -> (B, P, d) for `output`.
        `embed`: the encoder's hash embedding module (codepoints -> (.., E)), called, not read.
        Padding slots come last in the order, so a real step never sees one."""
        B, P = gold_steps.shape
        steps = torch.arange(P, device=y_steps.device)
        if self.reveal == "shifted":
            previous = torch.cat([gold_steps.new_full((B, 1), schema.BOS), gold_steps[:, :-1]], dim=1)  # (B, P)
            x = self.project(torch.cat([y_steps, embed(previous).to(y_steps.dtype)], dim=-1))  # (B, P, d)
            return self.layer(x, key_absent=(steps[None, :] > steps[:, None]).unsqueeze(0))  # the future is absent
        nothing = embed(gold_steps.new_full((1, 1), schema.BOS)).to(y_steps.dtype).expand(B, P, -1)
        queries = self.project(torch.cat([y_steps, nothing], dim=-1))  # (B, P, d)
        content = self.project(torch.cat([y_steps, embed(gold_steps).to(y_steps.dtype)], dim=-1))  # (B, P, d)
        # Keys 0..P-1: the query rows (step t sees only its own); P..2P-1: content of steps s < t.
        keys = torch.arange(2 * P, device=y_steps.device)
        visible = (keys[None, :] == steps[:, None]) | ((keys[None, :] >= P) & (keys[None, :] - P < steps[:, None]))
        return self.layer(torch.cat([queries, content], dim=1), key_absent=~visible.unsqueeze(0),
                          query_index=steps.expand(B, P))


class SubwordHead(nn.Module):
    """CANINE-S (§3.2.2): the output at one chosen character of each span, transform, softmax over
    the subword vocabulary. Dropped at export (the paper discards the vocabulary)."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        if config.num_subword_vocab <= 0:
            raise ValueError("CANINE-S needs config.num_subword_vocab > 0 (the tokenizer's vocabulary size)")
        self.transform = Transform(config, config.hidden_size)
        self.output = Output(config.hidden_size, config.num_subword_vocab)

    def forward(self, y):
        return self.transform(y)  # (B, P, d) for `output`


class CaninePretrainingModel(nn.Module):
    """Encoder + one objective head ("char" = CANINE-C, "subword" = CANINE-S) + optional SOP."""

    def __init__(self, config: CanineConfig, objective: str):
        super().__init__()
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.config, self.objective = config, objective
        self.encoder = CanineModel(config)
        self.head = CharHead(config) if objective == "char" else SubwordHead(config)
        self.sop = Output(config.hidden_size, 2) if config.sop_loss_weight else None
        self.init_weights()

    def init_weights(self):
        self.encoder.init_weights()
        init_weights(self.head, self.config.initializer_range, self.config.initializer)
        if self.sop is not None:
            init_weights(self.sop, self.config.initializer_range, self.config.initializer)

    def forward(self, batch: dict[str, torch.Tensor], return_logits: bool = False) -> PretrainingOutput:
        """Loss of one batch from training/batch.py. The logits (B, P, classes) are only
        materialized with `return_logits` (for CANINE-C in the shuffled step order)."""
        if self.objective == "char":
            order = batch["char_order"]  # (B, P): slot of each step
            positions = batch["char_positions"].gather(1, order)  # (B, P), step order
            out = self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], positions)
            hidden = self.head(out.sequence_output, batch["char_gold_ids"].gather(1, order),
                               self.encoder.embeddings.hash_tables)
            targets, weights = batch["char_targets"].gather(1, order), batch["char_weights"].gather(1, order)
        else:
            out = self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                               batch["subword_positions"])
            hidden = self.head(out.sequence_output)
            targets, weights = batch["subword_labels"], batch["subword_weights"]
        loss, correct, count = self.head.output(hidden, targets, weights)
        logits = self.head.output(hidden) if return_logits else None
        if self.sop is None or "sop_labels" not in batch:
            return PretrainingOutput(loss, correct, count, loss.detach(), logits=logits)
        labels = batch["sop_labels"]  # (B,), SOP_NO_PAIR (-1) where the example has one segment
        sop_loss, sop_correct, sop_count = self.sop(out.pooled_output, labels.clamp(min=0), labels != schema.SOP_NO_PAIR)
        return PretrainingOutput(loss + self.config.sop_loss_weight * sop_loss, correct, count, loss.detach(),
                                 sop_loss.detach(), sop_correct, sop_count, logits)

    def num_flops_per_example(self, seq_len: int) -> int:
        """Forward + backward matmul FLOPs of encoder + head (exact count, training/flops.py)."""
        return flops.pretraining_flops(self.config, self.objective, seq_len)
