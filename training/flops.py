"""FLOPs per example for MFU: an exact count of the matmuls, not the 6N rule.

Counted: every dense / conv matmul and the attention score and value matmuls, 2 FLOPs per
multiply-add; backward = 2 x forward (input and weight gradients), so training = 3 x forward.
Not counted: embedding lookups, norms, activations, softmax, dropout (a few % of the total).
Attention is counted over the keys a query may see (blocks of 128 in the local layer, all keys
elsewhere, all 2P rows (P with "shifted") in CANINE-C's head layer, i.e. what the kernels compute).
"""

from training.canine_config import CanineConfig


def _layer(config: CanineConfig, queries: int, keys: int, keys_per_query: int) -> int:
    """Forward FLOPs of one transformer layer: Q, output and FFN at the queries; K, V at the keys."""
    d, f = config.hidden_size, config.intermediate_size
    projections = queries * (2 * d * d + 2 * d * f) + keys * 2 * d * d  # multiply-adds
    attention = 2 * queries * keys_per_query * d  # QK^T and PV
    return 2 * (projections + attention)


def encoder_forward_flops(config: CanineConfig, seq_len: int, num_predictions: int | None = None,
                          reference_upsampling: bool = False) -> int:
    """`reference_upsampling`: count the upsampling conv over both halves at every character, as
    the Hugging Face port computes it (for the benchmark's baseline)."""
    d, r = config.hidden_size, config.downsampling_rate
    molecules = seq_len // r
    total = _layer(config, seq_len, seq_len, min(seq_len, config.local_transformer_stride))
    if config.factorized_embedding:  # ALBERT's projection E -> d; sharing layers changes no FLOPs
        total += 2 * seq_len * config.embedding_width * d
    total += 2 * molecules * r * d * d  # downsampling conv
    total += config.num_hidden_layers * _layer(config, molecules, molecules, molecules)
    total += 2 * d * d  # pooler
    # upsampling conv: the h_init half at every character, the molecule half once per molecule
    upsampled_molecules = seq_len if reference_upsampling else molecules
    total += 2 * (seq_len + upsampled_molecules) * d * d * config.upsampling_kernel_size
    queries = seq_len if num_predictions is None or not config.targeted_upsampling else num_predictions
    total += _layer(config, queries, seq_len, seq_len)
    return total


def head_forward_flops(config: CanineConfig, objective: str, num_predictions: int) -> int:
    d, p = config.hidden_size, num_predictions
    joined = d + config.embedding_width  # CANINE-C's [y_seq (d) ; gold embedding (E)]
    if objective == "char" and config.char_reveal == "two_stream":
        total = 2 * 2 * p * joined * d  # [y_seq ; gold or BOS embedding] -> d, for both streams
        total += _layer(config, p, 2 * p, 2 * p)  # queries at the P steps, keys and values over both streams
        total += 2 * p * d * config.num_hash_buckets  # bucket logits
    elif objective == "char":
        total = 2 * p * joined * d  # [y_seq ; gold embedding] -> d
        total += _layer(config, p, p, p)  # the left-to-right layer
        total += 2 * p * d * config.num_hash_buckets  # bucket logits
    else:
        total = 2 * p * d * d + 2 * p * d * config.num_subword_vocab  # transform, vocabulary logits
    if config.sop_loss_weight:
        total += 2 * d * 2
    return total


def encoder_flops(config: CanineConfig, seq_len: int, num_predictions: int | None = None,
                  reference_upsampling: bool = False) -> int:
    """Training (forward + backward) FLOPs of the encoder for one example."""
    return 3 * encoder_forward_flops(config, seq_len, num_predictions, reference_upsampling)


def pretraining_flops(config: CanineConfig, objective: str, seq_len: int) -> int:
    """Training FLOPs of encoder + head for one example at the static prediction count."""
    p = config.max_char_predictions if objective == "char" else config.max_subword_predictions
    return 3 * (encoder_forward_flops(config, seq_len, p) + head_forward_flops(config, objective, p))
