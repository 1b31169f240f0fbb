"""CANINE model configuration: one dataclass, defaults = CANINE-base, plus named sizes (the
model's shape; a training preset, training/configs/*.yaml, names one as model.size).

Field names follow `transformers.CanineConfig` wherever Hugging Face has the same field, so
`training.hf` can copy them across unchanged (the GELU variant in particular, docs/canine.md "GELU").
Facts and figures: docs/canine.md (paper = Clark et al., TACL 2022, arXiv 2103.06874).
"""

import dataclasses
from dataclasses import dataclass

from contract import schema

# Support up to 16 hash functions (google-research/language canine/modeling.py; docs/canine.md "Hash embedding").
HASH_PRIMES = (31, 43, 59, 61, 73, 97, 103, 113, 137, 149, 157, 173, 181, 193, 211, 223)

# HF activation names we accept. "gelu" is the exact erf form (what the HF config says);
# "gelu_new" and "gelu_pytorch_tanh" are both the tanh approximation that Google's code trained with.
GELU_VARIANTS = ("gelu", "gelu_new", "gelu_pytorch_tanh")

INITIALIZERS = ("original", "normal")
CHAR_REVEALS = ("two_stream", "shifted")
OBJECTIVES = ("char", "subword")  # CANINE-C (autoregressive characters), CANINE-S (subwords)


@dataclass
class CanineConfig:
    # --- encoder shape (paper §3, CANINE-base) ---
    hidden_size: int = 768  # d
    num_hidden_layers: int = 12  # L of the deep (molecule) stack
    num_attention_heads: int = 12
    intermediate_size: int = 3072  # FFN width
    # Google's code (which trained the released checkpoints) uses the tanh approximation; HF's
    # config says exact "gelu". We default to Google's; the export writes whichever was used.
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    # Rows of the absolute position table; the maximum input length. HF sizes its table by
    # num_hash_buckets (16384), so export pads a smaller table up to that size.
    max_position_embeddings: int = 16384
    type_vocab_size: int = 16  # token types (segment ids)
    initializer_range: float = 0.02  # std of the initial weights (BERT)
    # "original": as Google's code (language/canine/modeling.py): truncated normal (cut at 2 std)
    # for dense weights and embeddings, TF's default Glorot-uniform for the two convolutions.
    # "normal": plain N(0, initializer_range) everywhere (HF's CaninePreTrainedModel._init_weights).
    initializer: str = "original"
    layer_norm_eps: float = 1e-12  # BERT / HF value
    # --- character <-> molecule path ---
    downsampling_rate: int = 4  # r: 2048 characters -> 512 molecules
    upsampling_kernel_size: int = 4  # width of the upsampling conv (padding 1 left / 2 right)
    num_hash_functions: int = 8  # K: each hash owns a d/K-column table, slices are concatenated
    num_hash_buckets: int = 16384  # B: rows per hash table, also CANINE-C's output buckets
    local_transformer_stride: int = 128  # block size of the initial local attention layer
    # --- optional vocabulary-free n-grams (paper §3.1); () = off, e.g. (2, 3, 4) ---
    # Each order adds its own K hashed tables; all orders are summed per slice. Not exportable to
    # HF (the port has no n-gram embedder).
    ngram_orders: tuple[int, ...] = ()
    # --- ALBERT's parameter reductions (Lan et al. 2020, §3.1); neither exports to HF ---
    # Cross-layer sharing ("all-shared"): the deep stack is one layer applied num_hidden_layers
    # times. Saves (L-1) layers' parameters, no FLOPs. The local and final layers stay their own.
    share_layers: bool = False
    # Factorized embedding: 0 = off (embeddings at hidden_size). E > 0: hash / n-gram tables of
    # E/K columns, position and token type E wide, LayerNorm at E, then Linear(E, d) (ALBERT's
    # `embedding_hidden_mapping_in`, only where E != d, as there). CANINE-C's gold embeddings are E.
    embedding_size: int = 0
    # --- speed / memory switches (not part of the architecture) ---
    gradient_checkpointing: bool = False  # recompute each transformer layer in backward
    # Paper §3.2.3: compute the final layer only at the positions the loss reads. False computes
    # it everywhere and gathers afterwards (same numbers; only for the speed benchmark / tests).
    targeted_upsampling: bool = True
    # "auto": scaled_dot_product_attention on GPU (fused kernels, dropout inside them) and for fp32
    # without dropout on CPU; explicit matmuls on CPU in bf16 or with attention dropout, where
    # they measured faster (2-4x in bf16, ~1.3x for fp32 with dropout; see model.attention).
    # "sdpa": SDPA everywhere.
    attention_backend: str = "auto"
    # --- pretraining heads (paper §3.2, §4.1.3) ---
    num_subword_vocab: int = 0  # CANINE-S output size; set from tokenizer.json's vocabulary
    max_char_predictions: int = schema.MAX_CHAR_PREDICTIONS  # CANINE-C: 320 per example
    max_subword_predictions: int = schema.MAX_SUBWORD_PREDICTIONS  # CANINE-S: 80 per example
    # Weight of the sentence-order loss on the pooled output (ALBERT §4.2), using the shards'
    # `sop_label`. The paper's losses do not need it; without some loss on the pooler it never
    # receives a gradient during pretraining. 0 switches it off.
    sop_loss_weight: float = 1.0
    # CANINE-C's head (heads.CharHead; docs/pretraining.md has the comparison): "shifted" is the
    # paper's wording read literally, step t holding position p_t beside the character revealed
    # at step t-1 (which sits at another position); "two_stream" binds each revealed character to
    # its own position. Equal at 500 tiny steps, "shifted" ahead at 200: the default.
    char_reveal: str = "shifted"

    def __post_init__(self):
        self.ngram_orders = tuple(int(n) for n in self.ngram_orders)
        problems = []
        if self.hidden_size % self.num_attention_heads:
            problems.append(f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}")
        if self.embedding_size < 0:
            problems.append(f"embedding_size must be 0 (off) or positive, got {self.embedding_size}")
        elif self.embedding_width % self.num_hash_functions:
            which = "embedding_size" if self.embedding_size else "hidden_size"
            problems.append(f"{which} {self.embedding_width} is not a multiple of num_hash_functions "
                            f"{self.num_hash_functions} (each hash owns 1/K of the embedding columns)")
        if not 1 <= self.num_hash_functions <= len(HASH_PRIMES):
            problems.append(f"num_hash_functions must be in 1..{len(HASH_PRIMES)}, got {self.num_hash_functions}")
        if self.hidden_act not in GELU_VARIANTS:
            problems.append(f"hidden_act must be one of {GELU_VARIANTS}, got {self.hidden_act!r}")
        if self.char_reveal not in CHAR_REVEALS:
            problems.append(f"char_reveal must be one of {CHAR_REVEALS}, got {self.char_reveal!r}")
        if self.initializer not in INITIALIZERS:
            problems.append(f"initializer must be one of {INITIALIZERS}, got {self.initializer!r}")
        if self.attention_backend not in ("auto", "sdpa"):
            problems.append(f"attention_backend must be 'auto' or 'sdpa', got {self.attention_backend!r}")
        if any(n < 2 for n in self.ngram_orders) or len(set(self.ngram_orders)) != len(self.ngram_orders):
            problems.append(f"ngram_orders must be distinct orders >= 2 (unigrams are always on), got {self.ngram_orders}")
        if self.upsampling_kernel_size < 1 or self.downsampling_rate < 1:
            problems.append("downsampling_rate and upsampling_kernel_size must be >= 1")
        if self.local_transformer_stride % self.downsampling_rate:
            # Keeps every molecule inside one local block, as in the original (128 = 32 * 4).
            problems.append(f"local_transformer_stride {self.local_transformer_stride} is not a multiple of downsampling_rate {self.downsampling_rate}")
        if problems:
            raise ValueError("invalid CanineConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self) -> int:
        """Width of the character embeddings: embedding_size (ALBERT's E), or hidden_size when 0."""
        return self.embedding_size or self.hidden_size

    @property
    def factorized_embedding(self) -> bool:
        """True when the embeddings need ALBERT's projection E -> d (embedding_width != hidden_size)."""
        return self.embedding_width != self.hidden_size

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "CanineConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"CanineConfig.from_dict: unknown field(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

    def replace(self, **changes) -> "CanineConfig":
        return dataclasses.replace(self, **changes)


SIZES: dict[str, CanineConfig] = {
    # Tests and smoke runs: every code path, seconds on a CPU. Inputs up to the paper's n (the
    # position table); 2048 buckets keep the CANINE-C softmax small.
    "tiny": CanineConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        num_hash_buckets=2048, max_position_embeddings=schema.DEFAULT_SEQ_LEN, local_transformer_stride=32,
    ),
    # The benchmark's "small config" and CPU smoke pretraining at the paper's n.
    "small": CanineConfig(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
        max_position_embeddings=schema.DEFAULT_SEQ_LEN,
    ),
    "base": CanineConfig(),  # CANINE-base: 12 x 768, 132M parameters with B = 16384
}


def of_size(name: str, **overrides) -> CanineConfig:
    """A copy of a named size with some fields changed."""
    if name not in SIZES:
        raise KeyError(f"unknown model size {name!r}; choose from {sorted(SIZES)}")
    return SIZES[name].replace(**overrides)
