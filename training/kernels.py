"""Fast paths the model and heads call, each with the measurement that chose it; the model files
say what is computed, this one how (nanoGPT keeps its kernels beside the model the same way).

- `linear` / `Linear`: fp32 linears on CPU in oneDNN rather than MKL's sgemm (~2x on this
  project's AMD CPU), F.linear everywhere else;
- `keep_mask` / `dropout` / `Dropout`: dropout from 16 cheap random bits per element on CPU;
- `attention`: SDPA, or the same math written out on CPU where that measured faster;
- `linear_cross_entropy`: the output projection and its cross-entropy in chunks of rows,
  gradients in the same pass, never holding all the logits.
Every function takes plain tensors: the weights belong to the modules that call these.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

def keep_mask(shape, p: float, device, dtype=torch.bool) -> torch.Tensor:
    """Bernoulli(1 - p) as 0/1 in `dtype`, p rounded to a multiple of 2**-16: 16 random bits per
    element cut from int64 draws. On this project's CPU that is ~5x faster than `bernoulli_`
    (1.3 ms vs 7.8 ms per 1M elements, measured), and dropout's draws were ~5% of a step.
    Multiplying by a mask of the tensor's own dtype is 3x faster than by a bool one (measured)."""
    if torch.compiler.is_compiling():  # random_ breaks the graph; inductor fuses its own RNG
        return (torch.rand(shape, device=device) >= p).to(dtype)
    n = math.prod(shape)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)
    return (bits.view(torch.int16)[:n].view(shape) >= round(p * 65536) - 32768).to(dtype)


def dropout(x, p: float):
    """Inverted dropout with `keep_mask`'s cheap bits (training only; callers check)."""
    return torch.mul(x, keep_mask(x.shape, p, x.device, x.dtype)).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    """nn.Dropout with cheap random bits on CPU (`keep_mask`); F.dropout elsewhere (fused on GPU)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu" or torch.compiler.is_compiling():
            return F.dropout(x, self.p, training=True)
        return dropout(x, self.p)


def _onednn_mm(a, b_t, bias=None):
    """a @ b_t^T (+ bias) for 2-D fp32 `a` (N, k) and `b_t` (n, k), contiguous or transposed.

    The one use of a private torch API: `torch.ops.mkldnn._linear_pointwise(input, weight, bias,
    attr, scalars, algorithm)`, the fused linear that torch's own oneDNN graph passes lower to
    (torch/_inductor/mkldnn_lowerings.py), with attr "none" = no fused post-op. Relied on: that
    signature and that it computes input @ weight^T + bias; tests/training/test_kernels.py
    checks both on the pinned torch, and `ONEDNN_LINEAR` falls back to F.linear without it."""
    return torch.ops.mkldnn._linear_pointwise(_dense(a), _dense(b_t), bias, "none", [], "")


def _dense(x):
    """x, or a contiguous copy if its rows are padded (a slice of a wider tensor, like the pooler's
    molecule 0 of each example): oneDNN's kernel for those measured ~800x slower."""
    return x if x.is_contiguous() or x.t().is_contiguous() else x.contiguous()


class _OneDNNLinear(torch.autograd.Function):
    """F.linear whose forward and both backward matmuls run in oneDNN rather than MKL's sgemm:
    fp32 on this project's AMD CPU (Zen 5, AVX-512), MKL reached 95-190 GFLOP/s and oneDNN
    190-400 on CANINE-base's shapes (measured), and matmuls are ~80% of a CPU training step."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn_mm(x.reshape(-1, x.shape[-1]), weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (N, out)
        grad_x = _onednn_mm(g, weight.t()).view(x.shape) if ctx.needs_input_grad[0] else None
        grad_w = _onednn_mm(g.t(), x.reshape(-1, x.shape[-1]).t()) if ctx.needs_input_grad[1] else None
        grad_b = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def linear(x, weight, bias=None):
    """F.linear, through oneDNN for fp32 on CPU (`_OneDNNLinear`); unchanged under autocast (bf16
    matmuls already go to oneDNN), torch.compile, on GPU and in builds without oneDNN."""
    if (x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32 and ONEDNN_LINEAR
            and not torch.is_autocast_enabled("cpu") and not torch.compiler.is_compiling()):
        return _OneDNNLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


# False: torch's default CPU kernels, as every nn.Linear uses (benchmarks/model_speed.py --aten-linear).
ONEDNN_LINEAR = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class Linear(nn.Linear):
    """nn.Linear (same parameters and state dict) computed by `linear`."""

    def forward(self, x):
        return linear(x, self.weight, self.bias)


def attention(q, k, v, bias, dropout_p: float, backend: str = "auto"):
    """softmax(q k^T / sqrt(dh) + bias) v with attention-probability dropout; (B, H, Lq, dh).

    SDPA on every device but one: on CPU, SDPA in bf16 runs the flash kernel 2-4x slower than
    plain matmuls (head_dim 64, shapes of the small config, measured: local blocks 50 vs 13 ms,
    deep 22 vs 8 ms, targeted final 54 vs 24 ms forward + backward), and with dropout it falls
    back to an unfused path drawing the mask with slow `bernoulli_`. There (backend "auto") we
    write the same math out, with exact dropout of the probabilities from `keep_mask`'s bits.
    """
    if backend == "sdpa" or q.device.type != "cpu" or (dropout_p == 0 and q.dtype == torch.float32):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p)
    with torch.autocast("cpu", enabled=False):  # q, k, v are already in the compute dtype
        scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2))  # (B, H, Lq, Lk)
        if bias is not None:
            scores.add_(bias)  # in place: the matmul's backward does not need its output
        probs = torch.softmax(scores, dim=-1)
        if dropout_p == 0:
            return torch.matmul(probs, v)
        probs = probs * keep_mask(probs.shape, dropout_p, probs.device, probs.dtype)
        return torch.matmul(probs, v) * (1.0 / (1.0 - dropout_p))  # rescale (B, H, Lq, dh), not probs


# Logit elements per chunk of rows in `linear_cross_entropy`. CPU: 4M fp32 = 16 MB, below glibc's
# 32 MB mmap ceiling, so chunks reuse heap memory instead of page-faulting fresh mappings (a full
# 640 x 16384 fp32 softmax, 42 MB, spent ~35 ms of 120 ms in page faults here). CUDA: large
# chunks keep the matmuls efficient; the full logits of a big batch would still take GBs.
_CHUNK_ELEMENTS = {"cpu": 2**22, "cuda": 2**28}


def _loss_and_gradients(h, w, b, targets, weights, chunk_rows: int, need_grad: bool):
    """Weighted mean cross-entropy of h @ w^T + b by chunks of rows, never holding all the
    logits, with its gradients with respect to h, w and b from the same pass: the loss is
    terminal, so d loss / d logits = (softmax - one-hot) * weight / count needs no recompute.
    Plain tensors, no autograd (the caller passes detached ones); h, w and b in the compute
    dtype. Returns (loss, correct, count, grad_h, grad_w, grad_b), gradients None without need_grad."""
    count = weights.sum()
    scale = weights / count.clamp(min=1.0)  # (N,) fp32
    loss = torch.zeros((), dtype=torch.float32, device=h.device)
    correct = torch.zeros((), dtype=torch.float32, device=h.device)
    grad_h = grad_w = grad_b = None
    if need_grad:
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros(w.shape, dtype=torch.float32, device=h.device)
        grad_b = torch.zeros(b.shape, dtype=torch.float32, device=h.device)
    for start in range(0, h.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        # Softmax and argmax in fp32 (argmax on bf16 logits measured 6x slower).
        logits = linear(h[rows], w, b).float()  # (n, V)
        t = targets[rows].unsqueeze(1)  # (n, 1)
        correct += ((logits.argmax(dim=1) == t.squeeze(1)).float() * weights[rows]).sum()
        log_probs = torch.log_softmax(logits, dim=1)  # one fused pass
        loss -= (log_probs.gather(1, t).squeeze(1) * scale[rows]).sum()
        if need_grad:
            probs = log_probs.exp_()  # softmax, in place
            probs.scatter_add_(1, t, probs.new_full(t.shape, -1.0))  # minus the one-hot
            probs.mul_(scale[rows].unsqueeze(1))  # d loss / d logits
            g = probs.to(h.dtype)
            grad_h[rows] = linear(g, w.t())  # g @ w
            grad_w.add_(linear(g.t(), h[rows].t()))  # g^T @ h; fp32 += compute dtype, converted on the fly
            grad_b += probs.sum(0)
    return loss, correct, count, grad_h, grad_w, grad_b


def linear_cross_entropy(h, weight, bias, targets, weights):
    """(loss, correct, count) of `h @ weight^T + bias` against `targets` with per-row `weights`
    (0 = padding): loss = sum(w * ce) / max(sum(w), 1); correct and count are detached, for accuracy.

    The gradients come from the forward pass (`_loss_and_gradients`) and reach autograd through
    ordinary tensor operations, not a custom autograd.Function: the returned loss is
    `value + (s - s.detach())` with s = <h, G_h> + <W, G_W> + <b, G_b>, which equals `value`
    exactly and whose gradient with respect to h, W and b is G_h, G_W, G_b. Autograd, Dynamo,
    AOTAutograd and Inductor all see the same plain graph. (The Function this replaces computed
    the same gradients and saved them with ctx.save_for_backward; compiled whole on an H100 with
    torch 2.11, every parameter's gradient came out exactly zero, while eager and the CPU were
    right: docs/compile.md.)"""
    h = h.reshape(-1, h.shape[-1])  # (N, d)
    device = h.device.type
    if torch.is_autocast_enabled(device):  # computed outside autocast below: cast like a Linear would
        h = h.to(torch.get_autocast_dtype(device))
    chunk = max(1, _CHUNK_ELEMENTS.get(device, 2**26) // weight.shape[0])
    need_grad = torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad or bias.requires_grad)
    with torch.autocast(device, enabled=False):
        # The parameters in the compute dtype; their gradients come back in their own dtype.
        w, b = weight.detach().to(h.dtype), bias.detach().to(h.dtype)
        loss, correct, count, grad_h, grad_w, grad_b = _loss_and_gradients(
            h.detach(), w, b, targets.reshape(-1), weights.reshape(-1).float(), chunk, need_grad)
        if not need_grad:
            return loss, correct, count
        # d s / d h = G_h, d s / d W = G_W, d s / d b = G_b; s itself cancels out of the value.
        s = (torch.sum(h * grad_h, dtype=torch.float32) + torch.sum(weight * grad_w.to(weight.dtype))
             + torch.sum(bias * grad_b.to(bias.dtype)))
        return loss + (s - s.detach()), correct, count
