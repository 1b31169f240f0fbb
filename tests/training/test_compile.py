"""torch.compile of the whole pretraining model trains what eager trains: every parameter's
gradient after one backward, and the weights after a few optimizer steps (training/train/compile_check.py,
the same check benchmarks/gpu_check.py runs on a GPU).

Dropout is off (compiled code draws its dropout masks from another generator). Inductor's code
generation is slow on this 2-core CPU (~70 s a model, cold), so two combinations compile with
Inductor and the others with "aot_eager": Dynamo's capture and AOTAutograd's forward/backward
split, the layers where a loss computing its gradients in the forward pass went wrong, without
Inductor's kernels. Together they cover both objectives, both CANINE-C reveal modes, fp32 and
bf16 autocast, targeted upsampling on and off, the SOP head on every one.
"""

import pytest
import torch

from pipeline.synthetic import synthetic_rows
from training.train import compile_check
from training.batch import build_batch
from training.canine_config import of_size
from training.heads import CaninePretrainingModel

from canine_fixtures import one_thread  # noqa: F401 (autouse fixture)

LENGTH = 256

# (objective, char_reveal, precision, targeted_upsampling, backend)
COLD = pytest.mark.slow  # a cold Inductor compile of the model: about a minute on this machine
COMBINATIONS = [
    pytest.param("char", "shifted", "fp32", True, "inductor", marks=COLD),
    pytest.param("subword", "shifted", "bf16", False, "inductor", marks=COLD),
    ("char", "two_stream", "bf16", False, "aot_eager"),
    ("char", "two_stream", "fp32", True, "aot_eager"),
    ("char", "shifted", "bf16", True, "aot_eager"),
    ("subword", "shifted", "fp32", True, "aot_eager"),
]


def _model(objective, reveal, targeted):
    config = of_size("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, char_reveal=reveal,
                    targeted_upsampling=targeted, sop_loss_weight=1.0,
                    num_subword_vocab=500 if objective == "subword" else 0)
    torch.manual_seed(0)
    return CaninePretrainingModel(config, objective).train()


def _batch(objective, seed=0):
    """Four examples, two of them sentence pairs (synthetic_rows: odd rows), so the SOP head has work."""
    rows = synthetic_rows(4, LENGTH, seed=seed, vocab_size=500, min_length=LENGTH // 2)
    batch = build_batch(rows, LENGTH, objective, seed=seed, num_hash_buckets=2048)
    assert (batch["sop_labels"] >= 0).any(), "the batch must exercise the SOP head"
    return batch


@pytest.mark.parametrize("objective,reveal,precision,targeted,backend", COMBINATIONS)
def test_compiled_gradients_equal_eager_ones(objective, reveal, precision, targeted, backend):
    model = _model(objective, reveal, targeted)
    batch = _batch(objective)
    eager_loss, eager = compile_check.one_backward(model, batch, precision)
    compiled_loss, compiled = compile_check.one_backward(compile_check.compiled_copy(model, backend), batch, precision)
    assert compiled_loss == pytest.approx(eager_loss, rel=compile_check.RTOL[precision])
    assert sum(g is not None and g.any().item() for g in eager.values()) == len(eager), "every parameter learns"
    assert compile_check.gradient_problems(eager, compiled, compile_check.RTOL[precision]) == []


@pytest.mark.slow  # a cold Inductor compile
def test_compiled_training_moves_the_weights_as_eager_training_does():
    """Three SGD steps on three batches: the compiled model reads its updated weights each step
    (a graph that kept the first weights would match the first gradients, not these)."""
    model = _model("char", "shifted", True)
    batches = [_batch("char", seed) for seed in range(3)]
    twin = compile_check.compiled_copy(model)  # inductor, the same graph as the first combination
    eager_losses, eager_moves = compile_check.train_steps(model, batches)
    compiled_losses, compiled_moves = compile_check.train_steps(twin, batches)
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-4)
    assert eager_losses[2] < eager_losses[0]  # the steps are large enough to show
    assert compile_check.gradient_problems(eager_moves, compiled_moves, compile_check.RTOL["fp32"]) == []


def test_the_check_catches_zeroed_gradients():
    """What happened on the H100: the same loss, every gradient zero. The check must say so for
    each parameter, and for one gradient halved, one missing."""
    model = _model("subword", "shifted", True)
    _, eager = compile_check.one_backward(model, _batch("subword"))
    zeroed = {n: torch.zeros_like(g) for n, g in eager.items()}
    assert len(compile_check.gradient_problems(eager, zeroed, compile_check.RTOL["bf16"])) == len(eager)
    first, second = list(eager)[:2]
    broken = {**eager, first: eager[first] / 2, second: None}
    problems = compile_check.gradient_problems(eager, broken, compile_check.RTOL["bf16"])
    assert [p.split(":")[0] for p in problems] == [first, second]
