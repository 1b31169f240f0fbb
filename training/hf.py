"""Hugging Face interoperability: `export_hf(model, path)` and `import_hf(path)`.

`transformers` is imported inside the functions: it is an export / test extra
(pyproject `[hf]`), not a requirement of training. Key layout: CANINE.md "Hugging Face export
layout". Every conversion is a split, concatenation or reshape, so a round trip is exact.
"""

import torch

from training.config import CanineConfig
from training.model import CanineModel

# Config fields that mean the same in transformers.CanineConfig and ours (same names on purpose).
HF_CONFIG_FIELDS = (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range", "layer_norm_eps", "downsampling_rate",
    "upsampling_kernel_size", "num_hash_functions", "num_hash_buckets", "local_transformer_stride",
)

# Our module name -> HF module name inside one transformer layer (qkv is handled apart).
_LAYER_PARTS = {
    "attn_out": "attention.output.dense",
    "attn_norm": "attention.output.LayerNorm",
    "ffn_in": "intermediate.dense",
    "ffn_out": "output.dense",
    "ffn_norm": "output.LayerNorm",
}
# Our tensor name -> HF tensor name outside the layers (copied as they are).
_PLAIN = {"embeddings.token_type.weight": "char_embeddings.token_type_embeddings.weight"}
for _mine, _theirs in [
    ("embeddings.norm", "char_embeddings.LayerNorm"),
    ("downsample.norm", "chars_to_molecules.LayerNorm"),
    ("upsample.conv", "projection.conv"),
    ("upsample.norm", "projection.LayerNorm"),
    ("pooler", "pooler.dense"),
]:
    _PLAIN.update({f"{_mine}.{leaf}": f"{_theirs}.{leaf}" for leaf in ("weight", "bias")})


def _layer_names(config: CanineConfig) -> dict[str, str]:
    """Our layer prefix -> HF layer prefix."""
    names = {"local_layer": "initial_char_encoder.layer.0", "final_layer": "final_char_encoder.layer.0"}
    names.update({f"layers.{i}": f"encoder.layer.{i}" for i in range(config.num_hidden_layers)})
    return names


def to_hf_state_dict(model: CanineModel) -> dict[str, torch.Tensor]:
    """Our encoder's weights under Hugging Face `CanineModel` keys and layouts."""
    config, ours = model.config, model.state_dict()
    if config.ngram_orders:
        raise ValueError(f"cannot export to Hugging Face: ngram_orders={config.ngram_orders} has no HF equivalent")
    d, r, B = config.hidden_size, config.downsampling_rate, config.num_hash_buckets
    if config.max_position_embeddings > B:
        raise ValueError(f"cannot export: max_position_embeddings {config.max_position_embeddings} exceeds the "
                         f"HF position table of num_hash_buckets = {B} rows")
    hf = {}
    for k, table in enumerate(ours["embeddings.hash_tables.weight"].split(B)):
        hf[f"char_embeddings.HashBucketCodepointEmbedder_{k}.weight"] = table
    position = ours["embeddings.position.weight"]
    hf["char_embeddings.char_position_embeddings.weight"] = torch.cat(
        [position, position.new_zeros(B - position.shape[0], d)])  # HF sizes it by B; extra rows unused
    # (d, r*d) with columns (offset, channel) -> Conv1d (d_out, d_in, r)
    hf["chars_to_molecules.conv.weight"] = ours["downsample.proj.weight"].view(d, r, d).permute(0, 2, 1)
    hf["chars_to_molecules.conv.bias"] = ours["downsample.proj.bias"]
    for mine, theirs in _PLAIN.items():
        hf[theirs] = ours[mine]
    for mine, theirs in _layer_names(config).items():
        for leaf in ("weight", "bias"):
            for part, tensor in zip(("query", "key", "value"), ours[f"{mine}.qkv.{leaf}"].split(d)):
                hf[f"{theirs}.attention.self.{part}.{leaf}"] = tensor
            for part, hf_part in _LAYER_PARTS.items():
                hf[f"{theirs}.{hf_part}.{leaf}"] = ours[f"{mine}.{part}.{leaf}"]
    return {k: v.contiguous() for k, v in hf.items()}


def from_hf_state_dict(hf: dict[str, torch.Tensor], config: CanineConfig) -> dict[str, torch.Tensor]:
    """The inverse of `to_hf_state_dict`: HF `CanineModel` weights under our keys and layouts."""
    d, r, K = config.hidden_size, config.downsampling_rate, config.num_hash_functions
    hf = {k.removeprefix("canine."): v for k, v in hf.items()}  # task models prefix the encoder

    def take(key):
        if key not in hf:
            raise KeyError(f"Hugging Face checkpoint lacks {key!r} (have {len(hf)} tensors)")
        return hf[key]

    ours = {"embeddings.hash_tables.weight": torch.cat(
        [take(f"char_embeddings.HashBucketCodepointEmbedder_{k}.weight") for k in range(K)])}
    ours["embeddings.position.weight"] = take("char_embeddings.char_position_embeddings.weight")[: config.max_position_embeddings]
    ours["downsample.proj.weight"] = take("chars_to_molecules.conv.weight").permute(0, 2, 1).reshape(d, r * d)
    ours["downsample.proj.bias"] = take("chars_to_molecules.conv.bias")
    for mine, theirs in _PLAIN.items():
        ours[mine] = take(theirs)
    for mine, theirs in _layer_names(config).items():
        for leaf in ("weight", "bias"):
            ours[f"{mine}.qkv.{leaf}"] = torch.cat(
                [take(f"{theirs}.attention.self.{part}.{leaf}") for part in ("query", "key", "value")])
            for part, hf_part in _LAYER_PARTS.items():
                ours[f"{mine}.{part}.{leaf}"] = take(f"{theirs}.{hf_part}.{leaf}")
    return {k: v.contiguous() for k, v in ours.items()}


def hf_config_dict(config: CanineConfig) -> dict:
    return {name: getattr(config, name) for name in HF_CONFIG_FIELDS}


def config_from_hf(hf_config) -> CanineConfig:
    values = {name: getattr(hf_config, name) for name in HF_CONFIG_FIELDS}
    # HF's position table has num_hash_buckets rows, whatever max_position_embeddings says.
    values["max_position_embeddings"] = min(values["max_position_embeddings"], values["num_hash_buckets"])
    return CanineConfig(**values)


def export_hf(model, path) -> None:
    """Write a directory that `transformers.CanineModel.from_pretrained(path)` loads.

    `model` is a CanineModel or anything holding one as `.encoder` (a pretraining model: its
    head is dropped, as the paper throws away CANINE-S's vocabulary). The GELU variant is
    written to config.json as `hidden_act`.
    """
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    encoder = getattr(model, "encoder", model)
    if not isinstance(encoder, CanineModel):
        raise TypeError(f"export_hf needs a CanineModel or a model with one as .encoder, got {type(model).__name__}")
    weights = to_hf_state_dict(encoder)
    hf_model = HFModel(HFConfig(**hf_config_dict(encoder.config)))
    # strict: a key we forgot or invented fails here, not when someone loads the export.
    hf_model.load_state_dict({k: v.detach().to(torch.float32) for k, v in weights.items()}, strict=True)
    hf_model.save_pretrained(str(path))


def import_hf(path, **overrides) -> CanineModel:
    """Load a Hugging Face CANINE directory (CanineModel or a task model) into our encoder.

    `overrides` change non-architectural fields of the resulting config (dropout,
    gradient_checkpointing, num_subword_vocab, ...)."""
    from transformers import CanineModel as HFModel

    hf_model = HFModel.from_pretrained(str(path))
    config = config_from_hf(hf_model.config).replace(**overrides)
    model = CanineModel(config)
    model.load_state_dict(from_hf_state_dict(hf_model.state_dict(), config), strict=True)
    return model
