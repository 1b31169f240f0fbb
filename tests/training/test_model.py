"""The CANINE encoder: hash embedding, targeted upsampling, gradients, bf16, torch.compile, FLOPs,
ALBERT's layer sharing and factorized embedding."""

import subprocess
import sys

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from contract import schema
from training import flops
from training.canine_config import SIZES, CanineConfig, of_size
from training.heads import CaninePretrainingModel
from training.hf import to_hf_state_dict
from training.model import CanineModel, ngram_ids, num_parameters

from canine_fixtures import one_thread, padded_inputs  # noqa: F401 (autouse fixture)


def test_hash_embedding_matches_hand_computed_buckets():
    model = CanineModel(of_size("tiny"))  # B = 2048 buckets, K = 8 tables of 8 columns
    table = model.embeddings.hash_tables.weight
    # 'a' = 97: ((97 + 1) * p) % 2048 for p = 31, 43, 59, 61, 73, 97, 103, 113, worked by hand.
    expected = [990, 118, 1686, 1882, 1010, 1314, 1902, 834]
    got = model.embeddings.hash_tables(torch.tensor([[97]]))[0, 0]  # (d,)
    want = torch.cat([table[k * 2048 + b] for k, b in enumerate(expected)])
    assert torch.equal(got, want)
    # CLS = 0xE000 = 57344: 57345 = 28 * 2048 + 1, so bucket k is the prime itself.
    got = model.embeddings.hash_tables(torch.tensor([[schema.CLS]]))[0, 0]
    want = torch.cat([table[k * 2048 + p] for k, p in enumerate([31, 43, 59, 61, 73, 97, 103, 113])])
    assert torch.equal(got, want)


def test_ngram_ids_look_back_and_pad_at_the_start():
    ids = torch.tensor([[5, 6, 7, 8]])
    bigrams = ngram_ids(ids, 2)
    # position 0 sees PAD before it; equal bigrams give equal ids, different ones differ
    assert bigrams[0, 0] == ngram_ids(torch.tensor([[0, 5]]), 2)[0, 1]
    assert bigrams[0, 2] == ngram_ids(torch.tensor([[9, 6, 7]]), 2)[0, 2]
    assert len(set(bigrams[0].tolist())) == 4
    model = CanineModel(of_size("tiny", ngram_orders=(2, 3)))
    assert len(model.embeddings.ngram_tables) == 2
    out = model(*padded_inputs())
    out.sequence_output.sum().backward()
    assert all(t.weight.grad.abs().sum() > 0 for t in model.embeddings.ngram_tables)


@pytest.mark.parametrize("length", [131, 128, 37])
def test_targeted_upsampling_equals_full_at_gathered_positions(length):
    model = CanineModel(of_size("tiny")).eval()
    ids, mask, types = padded_inputs(L=length, lengths=(length, length // 2))
    positions = torch.tensor([[0, 5, length - 1, 5, 17], [1, 2, 3, length // 2 - 1, 9]])
    with torch.no_grad():
        full = model(ids, mask, types).sequence_output
        targeted = model(ids, mask, types, output_positions=positions)
    assert targeted.sequence_output.shape == (2, 5, 64)
    want = full.gather(1, positions[..., None].expand(-1, -1, 64))
    torch.testing.assert_close(targeted.sequence_output, want, rtol=0, atol=1e-5)


def test_shapes_for_lengths_not_multiple_of_rate_and_padding():
    model = CanineModel(of_size("tiny")).eval()
    for L in (4, 5, 33, 130):
        ids, mask, types = padded_inputs(L=L, lengths=(L, max(1, L // 3)))
        out = model(ids, mask, types)
        assert out.sequence_output.shape == (2, L, 64)
        assert out.pooled_output.shape == (2, 64)
        assert out.molecule_output.shape == (2, L // 4, 64)
        assert torch.isfinite(out.sequence_output).all()
    with pytest.raises(ValueError, match="input length 3000"):
        model(torch.ones(1, 3000, dtype=torch.long))


def _grads(config, objective, seed=0):
    torch.manual_seed(seed)
    model = CaninePretrainingModel(config, objective).train()
    from pipeline.synthetic import synthetic_rows
    from training.batch import build_batch

    batch = build_batch(synthetic_rows(3, 150, seed=1, min_length=60), 160, objective,
                        num_hash_buckets=config.num_hash_buckets)
    torch.manual_seed(seed + 1)  # the same dropout draws in both runs
    model(batch).loss.backward()
    return {n: p.grad for n, p in model.named_parameters()}


# ALBERT's switches (§3.1) on the tiny size (d = 64, K = 8): E = 32 gives tables of 4 columns.
SHARED, FACTORIZED = {"share_layers": True}, {"embedding_size": 32}
BOTH = {**SHARED, **FACTORIZED}


@pytest.mark.parametrize("objective, switches", [("char", {}), ("subword", {}), ("char", SHARED), ("char", FACTORIZED),
                                                 ("subword", BOTH)],
                         ids=["char", "subword", "char-shared", "char-factorized", "subword-both"])
def test_gradient_reaches_every_parameter_with_and_without_checkpointing(objective, switches):
    config = of_size("tiny", num_subword_vocab=1000, **switches)
    plain = _grads(config, objective)
    missing = [n for n, g in plain.items() if g is None or not g.abs().sum() > 0]
    assert not missing, f"parameters without gradient: {missing}"
    checkpointed = _grads(config.replace(gradient_checkpointing=True), objective)
    assert checkpointed.keys() == plain.keys()
    for name, g in plain.items():
        # Same dropout masks (checkpointing replays the RNG), so the same gradients.
        torch.testing.assert_close(checkpointed[name], g, rtol=1e-4, atol=1e-6, msg=name)


def test_bf16_autocast_forward_and_backward():
    config = of_size("tiny", num_subword_vocab=500)
    from pipeline.synthetic import synthetic_rows
    from training.batch import build_batch

    rows = synthetic_rows(2, 90, seed=3, vocab_size=500, min_length=40)  # padded, lengths not multiples of 4
    for objective in ("char", "subword"):
        model = CaninePretrainingModel(config, objective).train()
        batch = build_batch(rows, 99, objective, num_hash_buckets=config.num_hash_buckets)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(batch)
            enc = model.encoder(batch["input_ids"], batch["attention_mask"])
        assert enc.sequence_output.dtype == torch.bfloat16
        assert torch.isfinite(out.loss) and out.loss.dtype == torch.float32
        out.loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    # The bf16 encoder on bf16 weights (no autocast) runs too: masks follow the compute dtype.
    model = CanineModel(of_size("tiny")).to(torch.bfloat16).eval()
    out = model(*padded_inputs())
    assert out.sequence_output.dtype == torch.bfloat16 and torch.isfinite(out.sequence_output).all()


@pytest.mark.parametrize("train", [False, True])
def test_encoder_compiles_without_graph_breaks(train):
    model = CanineModel(of_size("tiny", gradient_checkpointing=train)).train(train)
    ids, mask, types = padded_inputs(L=70, lengths=(70, 33))
    positions = torch.tensor([[1, 2, 3], [4, 5, 6]])
    explanation = torch._dynamo.explain(model)(ids, mask, types, positions)
    assert explanation.graph_break_count == 0, explanation.break_reasons


def _sdpa_flops(q_shape, k_shape, *args, **kwargs):
    """QK^T and PV: 2 * 2 * B * H * Lq * Lk * dh (the counter has no rule for the CPU kernel)."""
    B, H, Lq, dh = q_shape
    return 4 * B * H * Lq * k_shape[2] * dh


def _sdpa_backward_flops(grad_shape, q_shape, k_shape, *args, **kwargs):
    return 2 * _sdpa_flops(q_shape, k_shape)


def _onednn_linear_flops(x_shape, w_shape, *args, **kwargs):
    """x (N, k) @ w (n, k)^T: the counter has no rule for kernels.linear's oneDNN kernel."""
    return 2 * x_shape[0] * x_shape[1] * w_shape[0]


def flop_counter() -> FlopCounterMode:
    """torch's FLOP counter, taught the CPU attention kernel and kernels.linear's oneDNN kernel."""
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_flops,
               torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_backward_flops,
               torch.ops.mkldnn._linear_pointwise: _onednn_linear_flops}
    return FlopCounterMode(display=False, custom_mapping=mapping)


@pytest.mark.parametrize("switches", [{}, SHARED, FACTORIZED, BOTH], ids=["default", "shared", "factorized", "both"])
def test_flop_formula_matches_torch_flop_counter(switches):
    config = of_size("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **switches)
    model = CanineModel(config)
    L = 128  # a multiple of the local block: no padded keys in the local layer
    ids = torch.randint(1, 5000, (1, L))
    for positions in (None, torch.arange(0, L, 4)[None]):
        counter = flop_counter()
        with counter:
            out = model(ids, output_positions=positions)
            (out.sequence_output.sum() + out.pooled_output.sum()).backward()
        P = None if positions is None else positions.shape[1]
        assert counter.get_total_flops() == pytest.approx(model.num_flops_per_example(L, P), rel=0.01)
    assert flops.encoder_flops(config, 2048, 320) < flops.encoder_flops(config, 2048)


def test_shared_layers_are_one_set_of_weights_applied_num_hidden_layers_times():
    torch.manual_seed(0)
    plain = CanineModel(of_size("tiny", num_hidden_layers=3))
    shared = CanineModel(of_size("tiny", num_hidden_layers=3, share_layers=True))
    assert len(plain.layers) == 3 and len(shared.layers) == 1
    layer = num_parameters(plain.layers[0])
    assert num_parameters(shared) == num_parameters(plain) - 2 * layer
    # One set of deep-stack weights in the state dict (what checkpoints and shapes.json hold).
    stack = {k for k in shared.state_dict() if k.startswith("layers.")}
    assert stack == {f"layers.0.{k}" for k in plain.layers[0].state_dict()}
    # Applied num_hidden_layers = 3 times (a forward hook counts the calls).
    shared.eval()
    calls = []
    shared.layers[0].register_forward_hook(lambda *args: calls.append(1))
    out = shared(*padded_inputs())
    assert len(calls) == 3
    assert out.sequence_output.shape == (2, 133, 64) and out.molecule_output.shape == (2, 33, 64)
    out.sequence_output.sum().backward()
    assert all(p.grad.abs().sum() > 0 for p in shared.layers[0].parameters())


def test_factorized_embedding_counts_and_shapes():
    """ALBERT §3.1: the embeddings are E wide, then Linear(E, d); the rest of the encoder is
    unchanged and CANINE-C's head joins [y (d) ; gold embedding (E)]."""
    plain, config = CanineModel(of_size("tiny")), of_size("tiny", embedding_size=32, ngram_orders=(2,))
    model = CanineModel(config)
    K, B, E, d = 8, 2048, 32, 64
    tables = 2 * K * B * (E // K)  # unigram and bigram hash tables
    assert num_parameters(model.embeddings) == tables + (2048 + 16) * E + 2 * E + (E * d + d)
    rest = num_parameters(plain) - num_parameters(plain.embeddings)
    assert num_parameters(model) - num_parameters(model.embeddings) == rest
    assert model.embeddings.hash_tables(torch.tensor([[97, 98]])).shape == (1, 2, E)
    ids, mask, types = padded_inputs()
    assert model.embeddings(ids, types).shape == (2, 133, d)
    out = model(ids, mask, types)
    assert out.sequence_output.shape == (2, 133, d) and out.pooled_output.shape == (2, d)
    assert model.embeddings.hash_tables.weight.stacked_parts == K  # LAMB: K tables of E/K columns
    head = CaninePretrainingModel(config, "char").head.project.dense
    assert head.in_features == d + E
    # E = d is ALBERT's unfactorized case: no projection, the default model.
    assert CanineModel(of_size("tiny", embedding_size=64)).state_dict().keys() == plain.state_dict().keys()
    with pytest.raises(ValueError, match="embedding_size 36 is not a multiple of num_hash_functions 8"):
        of_size("tiny", embedding_size=36)
    with pytest.raises(ValueError, match="embedding_size must be 0"):
        of_size("tiny", embedding_size=-8)


@pytest.mark.parametrize("switches", [SHARED, FACTORIZED], ids=["shared", "factorized"])
def test_albert_switches_are_refused_by_the_hugging_face_export(switches):
    with pytest.raises(ValueError, match="cannot export to Hugging Face: share_layers=.*factorized embedding"):
        to_hf_state_dict(CanineModel(of_size("tiny", **switches)))


def test_base_preset_matches_canine_base_and_counts_parameters():
    base = SIZES["base"]
    assert (base.hidden_size, base.num_hidden_layers, base.num_attention_heads, base.intermediate_size) == (768, 12, 12, 3072)
    assert (base.num_hash_functions, base.num_hash_buckets, base.local_transformer_stride) == (8, 16384, 128)
    assert (base.downsampling_rate, base.upsampling_kernel_size, base.type_vocab_size) == (4, 4, 16)
    assert base.max_position_embeddings == 16384 and base.hidden_dropout_prob == 0.1
    assert base.max_char_predictions == 320 and base.max_subword_predictions == 80
    with pytest.raises(ValueError, match="hidden_act"):
        CanineConfig(hidden_act="relu")
    with pytest.raises(ValueError, match="unknown field"):
        CanineConfig.from_dict({"hidden_size": 64, "bogus": 1})
    assert CanineConfig.from_dict(SIZES["tiny"].to_dict()) == SIZES["tiny"]


def test_model_code_imports_no_trainer_or_export_dependencies():
    code = ("import sys, training.model, training.heads, training.batch, training.flops; "
            "print([m for m in ('transformers', 'ray', 'deepspeed', 'apache_beam') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_original_initialization_is_truncated_normal_with_glorot_uniform_convs():
    """initializer "original" (the default), as Google's code: dense weights and embeddings from a
    normal of std 0.02 cut at +-2 std (std of what remains: 0.02 * 0.8796), the two convs
    Glorot-uniform over their conv fans; "normal" keeps the plain N(0, 0.02)."""
    torch.manual_seed(0)
    cfg = of_size("small")
    model = CaninePretrainingModel(cfg, "char")
    assert cfg.initializer == "original"
    std = cfg.initializer_range
    convs = {"encoder.downsample.proj.weight", "encoder.upsample.conv.weight"}
    for name, p in model.named_parameters():
        if p.ndim < 2 or name in convs:
            continue
        assert p.abs().max() <= 2 * std, name
        if p.numel() >= 100_000:
            assert p.std().item() == pytest.approx(std * 0.8796, rel=0.02), name
    d, r, k = cfg.hidden_size, cfg.downsampling_rate, cfg.upsampling_kernel_size
    for name, fans in (("encoder.downsample.proj.weight", r * d + d * r), ("encoder.upsample.conv.weight", 2 * d * k + d * k)):
        w, bound = dict(model.named_parameters())[name], (6 / fans) ** 0.5
        assert w.abs().max() <= bound and w.abs().max() > 0.99 * bound, name
        assert w.std().item() == pytest.approx(bound / 3**0.5, rel=0.02), name  # uniform(-b, b) has std b/sqrt(3)

    plain = CaninePretrainingModel(of_size("small", initializer="normal"), "char")
    weights = plain.encoder.layers[0].ffn_in.weight
    assert weights.abs().max() > 3 * std and weights.std().item() == pytest.approx(std, rel=0.02)
    with pytest.raises(ValueError, match="initializer must be one of"):
        of_size("tiny", initializer="xavier")
