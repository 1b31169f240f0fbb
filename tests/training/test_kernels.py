"""training/kernels.py: each fast path computes what the plain torch op computes, and the one
private torch API it uses still has the signature relied on."""

import pytest
import torch
import torch.nn.functional as F

from training import kernels
from training.kernels import Dropout, attention, keep_mask, linear, linear_cross_entropy
from training.model import attention_bias

from canine_fixtures import one_thread  # noqa: F401 (autouse fixture)


def test_the_private_onednn_linear_op_is_the_one_relied_on():
    """kernels._onednn_mm calls torch.ops.mkldnn._linear_pointwise(X, W, B, attr, scalars,
    algorithm) with attr "none": a new torch that renames or reorders it fails here, by name."""
    assert kernels.ONEDNN_LINEAR  # the pinned torch has it; without it the fp32 CPU speed-up is gone
    schema = str(torch.ops.mkldnn._linear_pointwise.default._schema)
    assert schema.startswith("mkldnn::_linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, "
                             "Scalar?[] scalars, str? algorithm) -> Tensor"), schema
    a, w, b = torch.randn(5, 7), torch.randn(3, 7), torch.randn(3)
    torch.testing.assert_close(kernels._onednn_mm(a, w, b), a @ w.T + b)
    torch.testing.assert_close(kernels._onednn_mm(a, w.T.contiguous().T), a @ w.T)  # a transposed weight view


def test_onednn_linear_matches_f_linear_with_gradients():
    x = torch.randn(3, 70, 96).transpose(0, 1).requires_grad_()  # strided input
    weight, bias = torch.randn(160, 96, requires_grad=True), torch.randn(160, requires_grad=True)
    grad = torch.randn(70, 3, 160)
    results = []
    for fn in (linear, torch.nn.functional.linear):
        y = fn(x, weight, bias)
        results.append([y, *torch.autograd.grad(y, (x, weight, bias), grad)])
    for ours, reference in zip(*results):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-4)


def test_fast_dropout_rate_and_scale():
    torch.manual_seed(0)
    keep = keep_mask((1000, 1000), 0.1, "cpu")
    assert abs(keep.float().mean().item() - 0.9) < 0.002
    drop = Dropout(0.1).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    assert torch.isclose(y[y != 0], torch.tensor(1 / 0.9)).all()
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # gradient = the same mask and scale
    assert torch.equal(drop.eval()(x), x)


def test_cpu_attention_paths_agree_and_drop_probabilities_exactly():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g) for n in (5, 9, 9))
    bias = attention_bias(torch.float32, torch.arange(9)[None, None, :] < torch.tensor([9, 6])[:, None, None])
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    lowered = [t.to(torch.bfloat16) for t in (q, k, v, bias)]
    explicit = attention(*lowered, dropout_p=0.0)  # bf16 on CPU: the explicit path
    torch.testing.assert_close(explicit.float(), reference, rtol=0.02, atol=0.02)
    # Dropout: the probabilities times a keep mask (rate p, rescaled), drawn by keep_mask.
    torch.manual_seed(3)
    dropped = attention(q, k, v, bias, dropout_p=0.25)
    torch.manual_seed(3)
    keep = keep_mask((2, 4, 5, 9), 0.25, "cpu")
    probs = torch.softmax(q @ k.transpose(-1, -2) / 4 + bias, dim=-1)
    torch.testing.assert_close(dropped, (probs * keep / 0.75) @ v)


@pytest.mark.parametrize("chunk_elements", [64 * 1000, 2**22])  # several chunks, one chunk
def test_linear_cross_entropy_matches_reference_loss_and_gradients(monkeypatch, chunk_elements):
    monkeypatch.setitem(kernels._CHUNK_ELEMENTS, "cpu", chunk_elements)
    torch.manual_seed(0)
    h = torch.randn(300, 32, requires_grad=True)
    linear = torch.nn.Linear(32, 1000)
    targets = torch.randint(0, 1000, (300,))
    weights = (torch.rand(300) > 0.3).float()
    loss, correct, count = linear_cross_entropy(h, linear.weight, linear.bias, targets, weights)
    loss.backward()
    got = [h.grad, linear.weight.grad, linear.bias.grad]
    h2 = h.detach().clone().requires_grad_()
    linear2 = torch.nn.Linear(32, 1000)
    linear2.load_state_dict(linear.state_dict())
    logits = linear2(h2)
    ref = (F.cross_entropy(logits, targets, reduction="none") * weights).sum() / weights.sum()
    ref.backward()
    torch.testing.assert_close(loss, ref)
    assert count == weights.sum()
    assert correct == ((logits.argmax(-1) == targets).float() * weights).sum()
    for a, b in zip(got, [h2.grad, linear2.weight.grad, linear2.bias.grad]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    # No prediction at all: loss 0, not NaN.
    empty, _, n = linear_cross_entropy(h, linear.weight, linear.bias, targets, torch.zeros(300))
    assert empty.item() == 0.0 and n.item() == 0.0
