"""Pretraining heads: the fused loss, CANINE-C's left-to-right order, overfitting one batch (also with
ALBERT's switches), FLOPs."""

import pytest
import torch

from pipeline.synthetic import synthetic_rows
from training import flops
from training.batch import build_batch
from training.canine_config import of_size
from training.heads import CaninePretrainingModel

from canine_fixtures import one_thread  # noqa: F401 (autouse fixture)
from test_model import flop_counter


def _batch(objective, config, seed=0, rows=3, length=200):
    table = synthetic_rows(rows, length, seed=seed, vocab_size=config.num_subword_vocab or 1000, min_length=length // 2)
    return build_batch(table, length, objective, seed=seed, num_hash_buckets=config.num_hash_buckets)


@pytest.mark.parametrize("reveal", ["two_stream", "shifted"])
def test_char_head_is_left_to_right_over_the_shuffled_order(reveal):
    config = of_size("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, char_reveal=reveal)
    model = CaninePretrainingModel(config, "char").eval()
    batch = _batch("char", config)
    with torch.no_grad():
        base = model(batch, return_logits=True).logits  # (B, P, buckets), step order
        order = batch["char_order"]
        # Change the gold character of step 10 of example 0: steps <= 10 must not move
        # (step 10's gold is revealed to the steps after it), step 11 must.
        changed = {k: v.clone() for k, v in batch.items()}
        slot = order[0, 10]
        changed["char_gold_ids"][0, slot] += 1
        logits = model(changed, return_logits=True).logits
    assert torch.equal(logits[0, :11], base[0, :11])
    assert not torch.allclose(logits[0, 11], base[0, 11])
    assert torch.equal(logits[1:], base[1:])


@pytest.mark.parametrize("reveal", ["two_stream", "shifted"])
def test_char_head_binds_each_revealed_character_to_its_position(reveal):
    """Two-stream: what step t sees is the set of (position, character) pairs revealed before it,
    so swapping two earlier steps leaves step t's prediction unchanged (the head's layer has no
    order of its own). Shifted: each character rides on the next step's position, so the same
    swap re-pairs characters with other positions and step t's prediction moves."""
    # Weights of std 0.2, so that a re-pairing shows far above rounding (at 0.02 it moves the
    # logits of a fresh model by ~1e-5).
    config = of_size("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, char_reveal=reveal,
                    initializer_range=0.2)
    torch.manual_seed(0)
    model = CaninePretrainingModel(config, "char").eval()
    batch = _batch("char", config, length=400)
    n = int(batch["char_weights"][0].sum())  # real steps of example 0 (47); padding steps come after
    swapped = {k: v.clone() for k, v in batch.items()}
    swapped["char_order"][0, [1, 3]] = batch["char_order"][0, [3, 1]]
    with torch.no_grad():
        base, moved = model(batch, return_logits=True).logits, model(swapped, return_logits=True).logits
    assert n > 10 and torch.equal(moved[0, :1], base[0, :1])
    later = torch.allclose(moved[0, 5:n], base[0, 5:n], atol=1e-4)  # ~2e-6 apart when bound, ~0.4 when not
    assert later if reveal == "two_stream" else not later


# ALBERT's two switches together (§3.1; tiny size: d = 64, E = 32).
ALBERT = {"share_layers": True, "embedding_size": 32}


@pytest.mark.parametrize("objective, switches", [("char", {}), ("subword", {}), ("char", ALBERT), ("subword", ALBERT)],
                         ids=["char", "subword", "char-albert", "subword-albert"])
def test_loss_falls_when_overfitting_one_batch(objective, switches):
    torch.manual_seed(0)
    config = of_size("tiny", num_subword_vocab=300, **switches)
    model = CaninePretrainingModel(config, objective).train()
    batch = _batch(objective, config, rows=2, length=160)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, accuracy = [], 0.0
    for _ in range(25):
        out = model(batch)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.objective_loss.item())
        accuracy = (out.correct / out.count).item()
    assert losses[-1] < 0.35 * losses[0], losses
    assert accuracy > 0.5
    assert out.sop_loss is not None and out.sop_count == (batch["sop_labels"] >= 0).sum()


def test_sop_can_be_switched_off_and_subword_needs_a_vocabulary():
    config = of_size("tiny", sop_loss_weight=0.0)
    model = CaninePretrainingModel(config, "char")
    assert model.sop is None
    out = model(_batch("char", config))
    assert out.sop_loss is None and out.sop_count is None
    torch.testing.assert_close(out.loss.detach(), out.objective_loss)
    with pytest.raises(ValueError, match="num_subword_vocab"):
        CaninePretrainingModel(of_size("tiny"), "subword")
    with pytest.raises(ValueError, match="objective"):
        CaninePretrainingModel(config, "mlm")


@pytest.mark.parametrize("E", [0, 32])
@pytest.mark.parametrize("share_layers", [False, True])
def test_pretraining_flops_add_the_head(E, share_layers):
    config = of_size("tiny", num_subword_vocab=300, embedding_size=E, share_layers=share_layers)
    char = CaninePretrainingModel(config.replace(char_reveal="two_stream"), "char").num_flops_per_example(2048)
    shifted = CaninePretrainingModel(config.replace(char_reveal="shifted"), "char").num_flops_per_example(2048)
    subword = CaninePretrainingModel(config, "subword").num_flops_per_example(2048)
    encoder_only = flops.encoder_flops(config, 2048, 320)
    d = 64
    e = E or d  # the gold embedding's width
    # CANINE-C's two-stream head: 640 rows d + e -> d, one layer with 320 queries over 640 keys,
    # d -> 2048 buckets at the 320 steps, x3 for training
    head = 3 * (2 * 640 * (d + e) * d + 2 * (320 * (2 * d * d + 2 * d * 128) + 640 * 2 * d * d + 2 * 320 * 640 * d)
                + 2 * 320 * d * 2048 + 2 * d * 2)
    assert char == encoder_only + head
    # shifted: 320 rows d + e -> d, one layer over 320 steps
    head = 3 * (2 * 320 * (d + e) * d + 2 * (320 * (2 * d * d + 2 * d * 128) + 320 * 2 * d * d + 2 * 320 * 320 * d)
                + 2 * 320 * d * 2048 + 2 * d * 2)
    assert shifted == encoder_only + head
    assert subword < shifted < char
    # Sharing saves parameters, not FLOPs; the factorized embedding adds its projection E -> d.
    default = of_size("tiny")
    projection = 3 * 2 * 2048 * E * d
    assert encoder_only == flops.encoder_flops(default, 2048, 320) + projection


@pytest.mark.parametrize("switches", [{}, ALBERT], ids=["default", "albert"])
@pytest.mark.parametrize("reveal", ["two_stream", "shifted"])
def test_pretraining_flop_formula_matches_torch_flop_counter(reveal, switches):
    config = of_size("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, char_reveal=reveal, **switches)
    model = CaninePretrainingModel(config, "char")
    batch = _batch("char", config, rows=1, length=128)
    counter = flop_counter()
    with counter:
        model(batch).loss.backward()
    assert counter.get_total_flops() == pytest.approx(model.num_flops_per_example(128), rel=0.01)
