"""TyDi QA's model (training/downstream.py CanineForTydiQA) and prediction rule (training/tydi_heads.py):
the loss is the three cross-entropies' mean per window, a window's logits and loss do not depend on
the batch's padding, gradients reach both heads, and best_spans is Google's postproc rule."""

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contract import schema
from contract.tydiqa import AnswerType
from training import flops
from training.canine_config import of_size
from training.downstream import IGNORE, PADDING_LOGIT, CanineForTydiQA, min_padded_length
from training.model import CanineModel
from training.tydi_heads import ANSWER_TYPES, best_spans

from canine_fixtures import one_thread  # noqa: F401 (autouse fixture)

MINIMAL, PASSAGE, UNKNOWN = AnswerType.MINIMAL, AnswerType.PASSAGE, AnswerType.UNKNOWN
TOL = 1e-5  # fp32, the same window in batches of other lengths: only summation order differs


def _window(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, token types) of a window of n characters: [CLS] random characters, type 1 from n // 3."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 0x3000, (n,), generator=g)
    ids[0] = schema.CLS
    types = (torch.arange(n) >= n // 3).long()
    return ids, types


def _batch(windows, L: int, labels=None) -> dict[str, torch.Tensor]:
    """Windows right-padded with zeros (ids, types, mask) to L; labels (start, end, type) per window."""
    ids = torch.zeros(len(windows), L, dtype=torch.long)
    types = torch.zeros_like(ids)
    for i, (w, t) in enumerate(windows):
        ids[i, : len(w)], types[i, : len(t)] = w, t
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": types}
    if labels is not None:
        batch.update(zip(("start_positions", "end_positions", "answer_types"), torch.tensor(labels).T))
    return batch


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CanineForTydiQA(of_size("tiny")).eval()  # eval: no dropout


def test_the_heads_are_googles_and_transformers_layers(model):
    d = model.config.hidden_size
    assert model.qa_outputs.weight.shape == (2, d) and model.answer_type_output.weight.shape == (5, d)
    assert ANSWER_TYPES == ("unknown", "yes", "no", "minimal", "passage")  # Google's data.AnswerType
    for layer in (model.qa_outputs, model.answer_type_output):  # truncated normal 0.02 at 2 std, zero bias
        assert layer.weight.abs().max() <= 0.04 and 0.01 < layer.weight.std() < 0.03
        assert not layer.bias.any()
    assert model.num_flops_per_example(512) == (flops.encoder_flops(model.config, 512) + 6 * 512 * d * 2
                                                + 6 * d * 5)


def test_loss_is_the_mean_of_the_three_cross_entropies_per_window(model):
    windows = [_window(n, seed) for n, seed in ((70, 1), (45, 2), (58, 3), (33, 4))]
    # minimal answer, UNKNOWN at [CLS], a passage, and a row without a label (a batch's filler)
    labels = [(30, 34, MINIMAL), (0, 0, UNKNOWN), (20, 40, PASSAGE), (5, 6, IGNORE)]
    batch = _batch(windows, 80, labels)
    out = model(batch)
    assert out.start_logits.shape == out.end_logits.shape == (4, 80) and out.type_logits.shape == (4, 5)
    assert {t.dtype for t in (out.start_logits, out.end_logits, out.type_logits, out.loss_sum)} == {torch.float32}
    assert out.count.item() == 3
    padding = ~batch["attention_mask"].bool()
    assert (out.start_logits[padding] == PADDING_LOGIT).all() and (out.end_logits[padding] == PADDING_LOGIT).all()

    expected = 0.0
    for i, (start, end, kind) in enumerate(labels[:3]):
        n = len(windows[i][0])  # the window's own characters: padding has no probability
        ce = [-F.log_softmax(out.start_logits[i, :n], -1)[start], -F.log_softmax(out.end_logits[i, :n], -1)[end],
              -F.log_softmax(out.type_logits[i], -1)[kind]]
        expected += sum(ce) / 3
    assert out.loss_sum.item() == pytest.approx(expected.item(), rel=1e-6)

    unlabelled = model({k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    assert unlabelled.loss_sum.item() == 0 and unlabelled.count.item() == 0
    assert torch.equal(unlabelled.start_logits, out.start_logits)


def test_logits_and_loss_are_fp32_under_bf16_autocast(model):
    batch = _batch([_window(70, 1), _window(45, 2)], 72, [(30, 34, MINIMAL), (0, 0, UNKNOWN)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(batch)
    assert {t.dtype for t in (out.start_logits, out.end_logits, out.type_logits, out.loss_sum)} == {torch.float32}
    assert torch.isfinite(out.loss_sum) and (out.start_logits[:, 45:][1] == PADDING_LOGIT).all()


def test_a_windows_logits_and_loss_do_not_depend_on_its_batch(model):
    """The window alone, padded by the few characters min_padded_length asks, and in batches padded
    to longer windows: the same logits at its characters, the same loss."""
    n = 61
    window, labels = _window(n, 5), (40, 44, MINIMAL)
    alone = _batch([window], min_padded_length(model.config, n), [labels])
    assert alone["input_ids"].shape[1] == 68  # molecules up to character 62 kept, not last
    outs = [model(alone)]
    for L, other in ((200, 200), (133, 97)):  # longer windows beside it: more padding after it
        outs.append(model(_batch([_window(other, 6), window], L, [(1, 2, PASSAGE), labels])))
    ref = outs[0]
    for out in outs[1:]:
        for mine, theirs in ((ref.start_logits[0, :n], out.start_logits[1, :n]),
                             (ref.end_logits[0, :n], out.end_logits[1, :n]), (ref.type_logits[0], out.type_logits[1])):
            torch.testing.assert_close(theirs, mine, rtol=TOL, atol=TOL)
        per_window = model(_batch([window], out.start_logits.shape[1], [labels])).loss_sum
        assert per_window.item() == pytest.approx(ref.loss_sum.item(), rel=TOL)


def test_min_padded_length_is_where_the_encoding_stops_changing():
    """For every length 4..72 (the tiny size: r = 4, blocks of 32: every remainder, two block ends):
    at min_padded_length and any longer padding the encoding equals that at a long padding; one
    character shorter, it does not (the bound is the least)."""
    config = of_size("tiny")
    torch.manual_seed(0)
    encoder = CanineModel(config).eval()

    def encode(ids, types, L):
        batch = _batch([(ids, types)], L)
        with torch.no_grad():
            out = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        return torch.cat([out.sequence_output[0, : len(ids)].flatten(), out.pooled_output[0]])

    for n in range(4, 73):
        ids, types = _window(n, n)
        reference = encode(ids, types, 400)
        least = min_padded_length(config, n)
        assert n < least <= n + 40
        for L, same in ((least - 1, False), (least, True), (least + 37, True)):
            if L >= n:
                close = torch.allclose(encode(ids, types, L), reference, rtol=TOL, atol=TOL)
                assert close == same, (n, L, least)
    assert min_padded_length(config, 2048) == config.max_position_embeddings


def test_gradients_reach_every_head_parameter():
    torch.manual_seed(0)
    model = CanineForTydiQA(of_size("tiny")).train()
    batch = _batch([_window(70, 1), _window(45, 2)], 72, [(30, 34, MINIMAL), (0, 0, UNKNOWN)])
    out = model(batch)
    (out.loss_sum / out.count).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
    for head in (model.qa_outputs, model.answer_type_output):
        for p in head.parameters():
            assert p.grad.abs().sum() > 0


def _google(start, end, doc, max_answer_length, beam, passage=None):
    """postproc.compute_predictions for one window, as Google wrote it (loops, sorted, max)."""
    def best_indexes(logits):
        ranked = sorted(enumerate(logits[1:], 1), key=lambda x: x[1], reverse=True)
        return [i for i, _ in ranked[:beam]]

    predictions = []
    for s in best_indexes(start):
        for e in best_indexes(end):
            if e < s or not doc[s] or not doc[e] or e - s + 1 > max_answer_length:
                continue
            if passage is not None and passage[s] != passage[e]:
                continue
            predictions.append((float(start[s]) + float(end[e]) - (float(start[0]) + float(end[0])), s, e))
    return max(predictions, key=lambda x: x[0]) if predictions else None


def test_best_spans_is_googles_rule_on_random_logits():
    rng = np.random.default_rng(0)
    py = random.Random(0)
    checked = found = 0
    for trial in range(400):
        L = py.randint(2, 90)
        # every fourth window has integer logits: ties, which the rule orders by position
        start, end = (rng.integers(-3, 4, L).astype(np.float32) if trial % 4 == 0
                      else rng.normal(size=L).astype(np.float32) for _ in range(2))
        doc = rng.random(L) < py.choice([0.1, 0.6, 1.0])
        passage = rng.integers(0, 3, L) if trial % 3 == 0 else None
        beam, longest = py.choice([1, 5, 30, 100]), py.choice([1, 3, 100])
        got = best_spans(start, end, doc, max_answer_length=longest, beam=beam, passage_ids=passage)
        want = _google(start, end, doc, longest, beam, passage)
        assert (got is None) == (want is None), trial
        if want is not None:
            assert got[1:] == want[1:] and got[0] == pytest.approx(want[0], abs=1e-5), trial
            found += 1
        checked += 1
    assert found > 200  # most windows have a span, some none
    # (B, L) torch tensors: one answer per row
    start, end = torch.randn(3, 40), torch.randn(3, 40)
    doc = torch.ones(3, 40, dtype=torch.bool)
    doc[:, :10] = False
    doc[2] = False
    got = best_spans(start, end, doc)
    assert got[2] is None and got[:2] == [best_spans(start[i], end[i], doc[i]) for i in range(2)]
    assert all(10 <= s <= e for _, s, e in got[:2])


def test_the_gpu_checks_heads_stage_runs_on_the_cpu(capsys):
    """benchmarks/gpu_check.py's `heads` stage (what a lent GPU runs for these heads) passes here on
    the CPU, so a GPU session spends its minutes on the device, not on the script."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gpu_check

    assert gpu_check.main(["--device", "cpu", "--config", "tiny", "--checks", "heads"]) == 0
    assert "PASS heads" in capsys.readouterr().out
