"""The CANINE encoder (paper §3, facts in docs/canine.md). Architecture only: no Ray, no DeepSpeed.

    codepoints -> hash embeddings -> local transformer layer (blocks of 128) = h_init
      -> strided conv (r = 4), drop last molecule, prepend CLS -> deep BERT stack -> pooler
      -> repeat molecules r times, concat with h_init -> conv (1 left / 2 right) -> final layer = y_seq

Speed choices of the architecture (measured with benchmarks/model_speed.py): fused QKV; the local
layer as one batched call over blocks; the strided conv as one matmul; the upsampling conv's
molecule half at molecule resolution; and targeted upsampling (§3.2.3): the final layer computes
queries only at the positions the loss reads. The kernels (oneDNN linears, cheap dropout bits,
CPU attention) are in training/kernels.py. Every weight is used inside the forward of the
module that owns it, so a wrapper that gathers a module's parameters around its forward
(DeepSpeed ZeRO-3, FSDP) needs no special case.
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from training import flops
from training.canine_config import HASH_PRIMES, CanineConfig
from training.kernels import Dropout, Linear, attention, linear

# n-gram ids: a rolling polynomial hash of the codepoints, kept below 2**31 so that
# (hash * multiplier + codepoint) stays inside int64 on every device.
_NGRAM_MULTIPLIER = 1_000_003
_NGRAM_MODULUS = 2**31 - 1


class CanineOutput(NamedTuple):  # a tuple: wrappers (ZeRO-3's hooks) find the tensors in it
    sequence_output: torch.Tensor  # (B, L, d), or (B, P, d) at `output_positions`
    pooled_output: torch.Tensor  # (B, d): tanh(dense(molecule 0))
    molecule_output: torch.Tensor  # (B, L // r, d): the deep stack's output


def activation(name: str):
    """GELU as named in the HF config: exact erf, or the tanh approximation Google's code used."""
    approximate = "none" if name == "gelu" else "tanh"
    return lambda x: F.gelu(x, approximate=approximate)


def attention_bias(dtype, key_valid=None, key_absent=None):
    """Additive attention bias (B | 1, 1, Lq | 1, Lk) in the compute dtype, or None.

    key_valid: bool, broadcastable to (B, Lq, Lk); False = padding. Masked with the dtype's
        minimum, as Hugging Face does: a row whose keys are all padding then attends uniformly
        over them exactly like the reference (never NaN), which the padded-batch parity needs.
    key_absent: bool, same broadcasting; True = the key does not exist at all (block padding,
        the future in a causal order): -inf, so it gets no weight even in such a row.
    """
    if key_valid is None and key_absent is None:
        return None
    bias = torch.zeros((), dtype=dtype, device=(key_valid if key_valid is not None else key_absent).device)
    if key_valid is not None:
        bias = bias.masked_fill(~key_valid, torch.finfo(dtype).min)
    if key_absent is not None:
        bias = bias.masked_fill(key_absent, float("-inf"))
    return bias.unsqueeze(1)  # (B, 1, Lq, Lk): one bias shared by the heads


def stacked(param: nn.Parameter, parts: int) -> None:
    """Mark a weight as `parts` logical tensors stacked along dim 0, fused for speed; what works
    per tensor (LAMB's trust ratio, training/train/lamb.py) treats each part as its own."""
    param.stacked_parts = parts


class QKV(Linear):
    """The fused query / key / value projection (rows: query, key, value; HF keeps three Linears).
    With `queries`: the query projection of those rows only, key and value of all of `x`."""

    def forward(self, x, queries=None):
        if queries is None:
            return linear(x, self.weight, self.bias)  # (B, L, 3d)
        d = self.out_features // 3
        w_q, w_kv = self.weight.split([d, 2 * d])
        b_q, b_kv = self.bias.split([d, 2 * d])
        return linear(queries, w_q, b_q), linear(x, w_kv, b_kv)  # (B, P, d), (B, L, 2d)


class TransformerLayer(nn.Module):
    """A post-LayerNorm BERT layer with fused QKV and SDPA. `query_index` selects the query rows."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        d = config.hidden_size
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.qkv = QKV(d, 3 * d)
        stacked(self.qkv.weight, 3)
        self.attn_out = Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ffn_in = Linear(d, config.intermediate_size)
        self.ffn_out = Linear(config.intermediate_size, d)
        self.ffn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.act = activation(config.hidden_act)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.attn_dropout = config.attention_probs_dropout_prob
        self.attn_backend = config.attention_backend

    def forward(self, x, key_valid=None, key_absent=None, query_index=None):
        B, Lk, d = x.shape
        H, dh = self.num_heads, self.head_dim
        if query_index is None:
            residual = x
            q, k, v = self.qkv(x).view(B, Lk, 3, H, dh).permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, L, dh)
        else:  # targeted: queries only at query_index, keys/values everywhere (paper §3.2.3)
            residual = x.gather(1, query_index.unsqueeze(-1).expand(-1, -1, d))  # (B, P, d)
            q, kv = self.qkv(x, queries=residual)
            q = q.view(B, -1, H, dh).transpose(1, 2)  # (B, H, P, dh)
            k, v = kv.view(B, Lk, 2, H, dh).permute(2, 0, 3, 1, 4).unbind(0)
        dropout_p = self.attn_dropout if self.training else 0.0
        bias = attention_bias(q.dtype, key_valid, key_absent)
        ctx = attention(q, k, v, bias, dropout_p, self.attn_backend)  # (B, H, Lq, dh)
        ctx = ctx.transpose(1, 2).reshape(B, -1, d)  # (B, Lq, d)
        h = self.attn_norm(residual + self.dropout(self.attn_out(ctx)))
        return self.ffn_norm(h + self.dropout(self.ffn_out(self.act(self.ffn_in(h)))))


class HashEmbedding(nn.Embedding):
    """K hash tables of E/K columns stacked into one (rows k*B .. (k+1)*B-1 are table k: one lookup,
    not K): (B, L) ids -> (B, L, E), hash k of x being ((x + 1) * PRIME[k]) % B (docs/canine.md "Hash embedding")."""

    def __init__(self, num_hashes: int, num_buckets: int, width: int):
        super().__init__(num_hashes * num_buckets, width // num_hashes)
        self.num_buckets = num_buckets
        stacked(self.weight, num_hashes)
        self.register_buffer("primes", torch.tensor(HASH_PRIMES[:num_hashes]), persistent=False)
        self.register_buffer("table_offsets", torch.arange(num_hashes) * num_buckets, persistent=False)

    def forward(self, ids):
        buckets = ((ids.unsqueeze(-1) + 1) * self.primes) % self.num_buckets + self.table_offsets  # (B, L, K)
        return super().forward(buckets).flatten(-2)  # (B, L, K, E/K) -> (B, L, E)


class Positions(nn.Embedding):
    """The absolute position table, read as its first `length` rows (no index tensor)."""

    def forward(self, length: int):
        return self.weight[:length]  # (L, E)


class CharEmbeddings(nn.Module):
    """Hash embeddings (K tables of E/K columns, concatenated) + token type + position, LayerNorm,
    dropout; E = d unless factorized, then Linear(E, d) (ALBERT §3.1, CanineConfig.embedding_size)."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        K, B, e = config.num_hash_functions, config.num_hash_buckets, config.embedding_width
        self.hash_tables = HashEmbedding(K, B, e)
        self.ngram_orders = config.ngram_orders
        self.ngram_tables = nn.ModuleList(HashEmbedding(K, B, e) for _ in config.ngram_orders)
        self.position = Positions(config.max_position_embeddings, e)
        self.token_type = nn.Embedding(config.type_vocab_size, e)
        self.norm = nn.LayerNorm(e, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        # ALBERT's `embedding_hidden_mapping_in` (google-research/albert modeling.py
        # transformer_model): after the embeddings' LayerNorm and dropout, only where E != d.
        self.hidden_mapping = Linear(e, config.hidden_size) if config.factorized_embedding else None

    def forward(self, input_ids, token_type_ids):
        x = self.hash_tables(input_ids)
        for order, table in zip(self.ngram_orders, self.ngram_tables):
            x = x + table(ngram_ids(input_ids, order))
        x = x + self.token_type(token_type_ids) + self.position(input_ids.shape[1])
        x = self.dropout(self.norm(x))  # (B, L, E)
        return x if self.hidden_mapping is None else self.hidden_mapping(x)  # (B, L, d)


def ngram_ids(ids, order: int):
    """(B, L) -> (B, L): one id per n-gram ending at each position (PAD before the start)."""
    h = ids
    for back in range(1, order):
        previous = F.pad(ids, (back, 0))[:, : ids.shape[1]]  # ids shifted right by `back`
        h = (h * _NGRAM_MULTIPLIER + previous + 1) % _NGRAM_MODULUS
    return h


class Downsample(nn.Module):
    """Conv1d(d, d, kernel = stride = r) + GELU as one matmul over r-character molecules, then drop
    the last molecule, prepend the CLS character's encoding, LayerNorm (docs/canine.md "Downsampling")."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        self.rate = config.downsampling_rate
        # Weight columns are ordered (offset in molecule, channel); hf.py converts to conv layout.
        self.proj = Linear(self.rate * config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h_init):
        B, L, d = h_init.shape
        M = L // self.rate  # the conv drops a trailing remainder of < r characters
        chars = h_init[:, : M * self.rate].reshape(B, M, self.rate * d)  # (B, M, r*d)
        molecules = self.act(self.proj(chars))[:, :-1]  # (B, M-1, d): keep a slot for CLS
        return self.norm(torch.cat([h_init[:, :1], molecules], dim=1))  # (B, M, d)


class UpsampleConv(nn.Conv1d):
    """Conv1d(2d, d, kernel K, "same" padding: 1 left / 2 right for 4) over [h_init ; molecules
    repeated r times], computed split by input channels: the h_init half is an ordinary conv,
    while the repeated molecules are constant over runs of r characters, so their taps are
    computed once per molecule (M x d x K*d instead of L x d x K*d multiply-adds, 3/8 of the conv's
    FLOPs saved) and gathered. One Conv1d's weight, as HF stores it (projection.conv)."""

    def __init__(self, hidden_size: int, width: int, rate: int):
        super().__init__(2 * hidden_size, hidden_size, width)
        self.rate = rate
        self.pads = ((width - 1) // 2, width - 1 - (width - 1) // 2)

    def forward(self, h_init, molecules):
        B, L, d = h_init.shape
        M, K, left = molecules.shape[1], self.kernel_size[0], self.pads[0]
        w_chars, w_molecules = self.weight.split(d, dim=1)  # (d, d, K) each
        y = F.conv1d(F.pad(h_init.transpose(1, 2), self.pads), w_chars, self.bias).transpose(1, 2)  # (B, L, d)
        taps = linear(molecules, w_molecules.permute(2, 0, 1).reshape(K * d, d))  # (B, M, K*d): tap k of molecule m
        taps = F.pad(taps.view(B, M * K, d), (0, 0, 0, 1))  # (B, M*K + 1, d): a zero row for the padding
        # Output i, tap k reads character j = i + k - left, i.e. molecule 1 + j // r (0 is CLS; the last
        # one also covers the remainder), or the zero row outside [0, L).
        j = torch.arange(L, device=h_init.device)[:, None] + torch.arange(K, device=h_init.device) - left  # (L, K)
        source = (j // self.rate + 1).clamp(max=M - 1) * K + torch.arange(K, device=h_init.device)
        source = source.masked_fill((j < 0) | (j >= L), M * K)
        return y + taps.index_select(1, source.flatten()).view(B, L, K, d).sum(2)  # (B, L, d)


class Upsample(nn.Module):
    """Repeat molecules to characters, concat after h_init, Conv1d(2d, d, kernel 4, padding 1 left /
    2 right) + GELU, LayerNorm, dropout. No residual from h_init (docs/canine.md "Upsampling")."""

    def __init__(self, config: CanineConfig):
        super().__init__()
        self.conv = UpsampleConv(config.hidden_size, config.upsampling_kernel_size, config.downsampling_rate)
        self.act = activation(config.hidden_act)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, h_init, molecules):
        return self.dropout(self.norm(self.act(self.conv(h_init, molecules))))


class CanineModel(nn.Module):
    def __init__(self, config: CanineConfig):
        super().__init__()
        self.config = config
        self.embeddings = CharEmbeddings(config)
        self.local_layer = TransformerLayer(config)
        self.downsample = Downsample(config)
        # With share_layers (ALBERT §3.1, "all-shared") the stack holds one layer, applied L times.
        distinct = 1 if config.share_layers else config.num_hidden_layers
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(distinct))
        self.pooler = Linear(config.hidden_size, config.hidden_size)
        self.upsample = Upsample(config)
        self.final_layer = TransformerLayer(config)
        self.init_weights()

    def init_weights(self):
        init_weights(self, self.config.initializer_range, self.config.initializer)

    def _layer(self, layer, x, **kwargs):
        if self.config.gradient_checkpointing and self.training and torch.is_grad_enabled():
            # Non-reentrant checkpointing: every parameter gets its gradient (the HF port's
            # reentrant variant leaves projection.conv without one, PR #27124).
            return checkpoint(layer, x, use_reentrant=False, **kwargs)
        return layer(x, **kwargs)

    def _local(self, x, valid):
        """The initial layer, attention inside blocks of `local_transformer_stride`, in one call."""
        B, L, d = x.shape
        S = self.config.local_transformer_stride
        n = -(-L // S)  # number of blocks
        pad = n * S - L
        blocks = F.pad(x, (0, 0, 0, pad)).view(B * n, S, d)  # (B*n, S, d)
        key_valid = None if valid is None else F.pad(valid, (0, pad)).view(B * n, 1, S)
        key_absent = None
        if pad:  # the last block is short: its missing keys do not exist (HF slices them off)
            key_absent = (torch.arange(n * S, device=x.device) >= L).view(1, n, S).expand(B, n, S).reshape(B * n, 1, S)
        out = self._layer(self.local_layer, blocks, key_valid=key_valid, key_absent=key_absent)
        return out.view(B, n * S, d)[:, :L]  # (B, L, d)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, output_positions=None) -> CanineOutput:
        B, L = input_ids.shape
        r = self.config.downsampling_rate
        if L > self.config.max_position_embeddings or L < r:
            raise ValueError(f"input length {L} must be within [{r}, {self.config.max_position_embeddings}]")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        valid = None if attention_mask is None else attention_mask.bool()

        h_init = self._local(self.embeddings(input_ids, token_type_ids), valid)  # (B, L, d)
        molecules = self.downsample(h_init)  # (B, M, d)
        M = molecules.shape[1]
        # Max-pool of the character mask, aligned as in the original (molecule j <- chars jr..jr+r-1).
        mol_valid = None if valid is None else valid[:, : M * r].reshape(B, M, r).any(-1)[:, None, :]  # (B, 1, M)
        for i in range(self.config.num_hidden_layers):  # layer i, or the one shared layer
            molecules = self._layer(self.layers[i % len(self.layers)], molecules, key_valid=mol_valid)
        pooled = torch.tanh(self.pooler(molecules[:, 0]))

        upsampled = self.upsample(h_init, molecules)  # (B, L, d)
        key_valid = None if valid is None else valid[:, None, :]  # (B, 1, L)
        if output_positions is not None and self.config.targeted_upsampling:
            sequence = self._layer(self.final_layer, upsampled, key_valid=key_valid, query_index=output_positions)
        else:
            sequence = self._layer(self.final_layer, upsampled, key_valid=key_valid)
            if output_positions is not None:
                d = sequence.shape[-1]
                sequence = sequence.gather(1, output_positions.unsqueeze(-1).expand(-1, -1, d))  # (B, P, d)
        return CanineOutput(sequence_output=sequence, pooled_output=pooled, molecule_output=molecules)

    def num_flops_per_example(self, seq_len: int, num_predictions: int | None = None) -> int:
        """Forward + backward matmul FLOPs of the encoder (exact count, see training/flops.py);
        with `num_predictions` the final layer is the targeted one."""
        return flops.encoder_flops(self.config, seq_len, num_predictions)


def init_weights(module: nn.Module, std: float, scheme: str = "original"):
    """Initialize every submodule of `module` (also used by the heads): zero biases, unit
    LayerNorms, and weights by `scheme` (CanineConfig.initializer). "original", as Google's code
    (language/canine/modeling.py): bert_modeling.create_initializer, a normal of std `std`
    truncated at 2 std, for dense layers and embeddings; the downsampling and upsampling convs are
    tf.layers.conv1d without an initializer, i.e. Glorot-uniform over the conv's fans
    (kernel * channels). "normal": N(0, std) for all weights."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Embedding)):
            if scheme == "normal":
                nn.init.normal_(m.weight, mean=0.0, std=std)
            else:
                nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    if scheme == "original":
        for m in module.modules():
            if isinstance(m, Downsample):  # a conv of kernel = stride = r held as a Linear(r*d, d)
                fan = m.proj.weight.shape[1]  # in: r*d; out: d channels * kernel r, the same
                bound = math.sqrt(6.0 / (fan + fan))
                nn.init.uniform_(m.proj.weight, -bound, bound)
            elif isinstance(m, Upsample):
                nn.init.xavier_uniform_(m.conv.weight)  # torch's fans of (out, in, k) = TF's of (k, in, out)


def num_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())

