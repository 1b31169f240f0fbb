"""Hugging Face interoperability: `export_hf(model, path)` and `import_hf(path)`;
`export_token_classifier(model, path, id2label)` for a fine-tuned NER model;
`export_question_answerer(model, path)` for a model fine-tuned on TyDi QA.
(A whole run, with its model card: training/train/export.py.)

An export of a pretraining model also holds its head, for a fill-in query: training/hf_masked.py,
copied in as modeling_canine_masked.py, is what `AutoModelForMaskedLM.from_pretrained(path,
trust_remote_code=True)` loads; `AutoModel` still gives the plain CanineModel.

`transformers` is imported inside the functions: it is an export / test extra
(pyproject `[hf]`), not a requirement of training. Key layout: docs/canine.md "Hugging Face export
layout". Every conversion is a split, concatenation or reshape, so a round trip is exact.
"""

import contextlib
import json
import os
import shutil
import tempfile

import torch

from training.canine_config import CanineConfig
from training.heads import CaninePretrainingModel
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
    if config.share_layers or config.factorized_embedding:  # ALBERT's switches (CanineConfig)
        raise ValueError(f"cannot export to Hugging Face: share_layers={config.share_layers}, embedding_size="
                         f"{config.embedding_size}; HF's CanineModel has neither cross-layer sharing nor a "
                         "factorized embedding")
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


def export_hf(model, path, max_length: int | None = None, files: dict[str, bytes] | None = None,
              subword_vocab: list[str] | None = None, char_inventory: dict | None = None) -> str:
    """Write a directory that `transformers.AutoModel.from_pretrained(path)` (a CanineModel) and
    `AutoTokenizer.from_pretrained(path)` (a CanineTokenizer) load; returns `path`.

    `model` is a CanineModel or anything holding one as `.encoder`. A pretraining model's head
    (not its SOP layer) is written too, for `AutoModelForMaskedLM` with trust_remote_code
    (`masked_head`); fine-tuning uses the encoder alone, as the paper does. `subword_vocab`
    (CANINE-S: the tokens by id, `subword_vocab_of`) lets its `fill` name the subwords;
    `char_inventory` (the training data's characters, `{"counts": [[codepoint, count], ...]}`)
    lets CANINE-C's answer a hash bucket with a character of the data. The GELU
    variant is written to config.json as `hidden_act`. `max_length` is the tokenizer's
    model_max_length (default: the position table's size); `files` are written beside (a model
    card README.md). `path` is a local directory or any fsspec URL; the export is published
    whole (`publish`).
    """
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    encoder = _encoder_of(model, "export_hf")
    hf_model = _loaded(HFModel(HFConfig(**hf_config_dict(encoder.config))), to_hf_state_dict(encoder))
    head = masked_head(model, subword_vocab) if isinstance(model, CaninePretrainingModel) else None
    if head is not None:
        hf_model.config.pretraining_head = head[0]
        hf_model.config.auto_map = {MASKED_AUTO_CLASS: f"{MASKED_MODULE}.{MASKED_CLASS}"}
        # transformers.pipeline("fill-mask", model=PATH, trust_remote_code=True) takes this in place of
        # its own FillMaskPipeline, which needs one logit row per token (pipelines/__init__.py, custom_tasks).
        hf_model.config.custom_pipelines = {"fill-mask": {
            "impl": f"{MASKED_MODULE}.{MASKED_PIPELINE}", "pt": [MASKED_AUTO_CLASS], "tf": [], "type": "text"}}

    def write_head(directory: str) -> None:
        _write_head(directory, head[1], subword_vocab, char_inventory)

    return _publish_hf(hf_model, path, max_length or encoder.config.max_position_embeddings, files,
                       write_head if head is not None else None)


def export_token_classifier(model, path, id2label: dict[int, str], max_length: int | None = None,
                            files: dict[str, bytes] | None = None) -> str:
    """Write a fine-tuned token classifier (training/downstream.py CanineForTokenClassification)
    as a directory that `transformers.AutoModelForTokenClassification.from_pretrained(path)` loads
    as transformers' CanineForTokenClassification, nothing missing or left over; returns `path`.

    Its weights are the encoder's, prefixed `canine.` (transformers' name for it in a task
    model), and `classifier.weight` / `classifier.bias`; config.json has `id2label` / `label2id`
    (`id2label` gives every class index of the classifier a distinct name) and the GELU variant
    as `hidden_act`. `max_length` is the tokenizer's model_max_length (default: the position
    table's size); `files` are written beside (a model card README.md); published whole
    (`publish`), as `export_hf` does.

    Entities with character offsets, on raw text (a str or a list of them):

        ner = pipeline("token-classification", model=PATH, aggregation_strategy="simple",
                       trust_remote_code=True)
        ner("Ana lives in New York.")
        # [{"entity_group": "PER", "word": "Ana", "start": 0, "end": 3, ...}, {... "New York" ...}]

    transformers' TokenClassificationPipeline asks a tokenizer for offsets only when it is a fast
    one, and CANINE has only a slow one, so with it `start` / `end` come back None. Its own
    `offset_mapping=` call argument would fill them in, but every call must then pass the
    offsets, a call without them quietly gives None, and a list of sentences gets the first
    sentence's offsets for all of them: wrong ones, or an IndexError where a later sentence is
    longer (pipelines/token_classification.py, transformers 5.23: the one mapping goes to every
    sentence and postprocess reads its row 0). So config.json's `custom_pipelines` points
    "token-classification" at training/hf_token.py, copied in as TOKEN_MODULE + ".py":
    transformers' own pipeline, with each character's offsets (character i of the text is token
    i + 1) added where a fast tokenizer's would be. The price is `trust_remote_code=True`;
    without it transformers refuses the task with a message naming that option, rather than
    answering without offsets. Its alias "ner" is registered too, so that `pipeline("ner", ...)`
    does not fall back to the plain pipeline (with two tasks registered, a `pipeline(model=PATH)`
    without one is refused: it must name one)."""
    from transformers import CanineConfig as HFConfig
    from transformers import CanineForTokenClassification as HFTokenClassifier

    from training import hf_token

    encoder = _encoder_of(model, "export_token_classifier")
    classifier = getattr(model, "classifier", None)
    if not isinstance(classifier, torch.nn.Linear):
        raise TypeError(f"export_token_classifier needs a model with a Linear .classifier, got {type(model).__name__}")
    labels = {int(i): str(name) for i, name in id2label.items()}
    if sorted(labels) != list(range(classifier.out_features)):
        raise ValueError(f"id2label must name the classifier's {classifier.out_features} classes 0.."
                         f"{classifier.out_features - 1}, got the ids {sorted(labels)}")
    if len(set(labels.values())) != len(labels):
        raise ValueError(f"id2label gives two classes one name: {labels}")
    config = HFConfig(**hf_config_dict(encoder.config), id2label=labels, label2id={v: k for k, v in labels.items()})
    config.custom_pipelines = {task: {"impl": f"{TOKEN_MODULE}.{TOKEN_PIPELINE}", "pt": [TOKEN_AUTO_CLASS],
                                      "tf": [], "type": "text"} for task in TOKEN_TASKS}
    weights = {f"canine.{k}": v for k, v in to_hf_state_dict(encoder).items()}
    weights.update({f"classifier.{k}": v for k, v in classifier.state_dict().items()})
    hf_model = _loaded(HFTokenClassifier(config), weights)

    def write_pipeline(directory: str) -> None:
        shutil.copyfile(hf_token.__file__, os.path.join(directory, f"{TOKEN_MODULE}.py"))

    return _publish_hf(hf_model, path, max_length or encoder.config.max_position_embeddings, files, write_pipeline)


def export_question_answerer(model, path, max_length: int | None = None, files: dict[str, bytes] | None = None) -> str:
    """Write a model fine-tuned on TyDi QA (training/downstream.py CanineForTydiQA) as a
    directory that transformers loads; returns `path`.

    Its weights are the encoder's, prefixed `canine.`, `qa_outputs.*` (start, end) and
    `answer_type_output.*`, all in model.safetensors. transformers' own
    CanineForQuestionAnswering.from_pretrained(path) loads it with only the two
    `answer_type_output` tensors unexpected, and gives our start and end logits (at the
    characters: ours are masked at padding). `AutoModelForQuestionAnswering` with
    `trust_remote_code=True` loads training/hf_qa.py, copied in as QA_MODULE + ".py"
    (config.json's `auto_map`): that model with the answer-type layer too, nothing missing or left
    over, and its offline call on a raw document:

        model = AutoModelForQuestionAnswering.from_pretrained(PATH, trust_remote_code=True)
        model.answer("Where does Ana live?", document)
        # {"answer": "New York", "start": 13, "end": 21, "score": ..., "type": "minimal", "passage": (0, 22)}

    config.json's `tydiqa` holds the reading settings `answer` uses (hf_qa.DEFAULTS, those of
    Google's tydiqa README commands for CANINE): windows of `max_length` characters (default 2048, at most the
    position table), a stride of 512, the question's last 256 characters, 45 passages, answers
    of at most 100 characters, a beam of 30. `max_length` is also the tokenizer's
    model_max_length; `files` are written beside (a model card README.md); published whole
    (`publish`), as `export_hf` does."""
    from transformers import CanineConfig as HFConfig

    from training import hf_qa

    encoder = _encoder_of(model, "export_question_answerer")
    heads = {name: getattr(model, name, None) for name in ("qa_outputs", "answer_type_output")}
    shapes = {"qa_outputs": 2, "answer_type_output": len(hf_qa.ANSWER_TYPES)}
    for name, layer in heads.items():
        if not isinstance(layer, torch.nn.Linear) or layer.out_features != shapes[name]:
            raise TypeError(f"export_question_answerer needs a model with a Linear .{name} of {shapes[name]} "
                            f"outputs (downstream.CanineForTydiQA), got {type(model).__name__}")
    max_length = min(max_length or hf_qa.DEFAULTS["max_length"], encoder.config.max_position_embeddings)
    config = HFConfig(**hf_config_dict(encoder.config))  # num_labels 2: transformers' qa_outputs is (2, d)
    config.tydiqa = {**hf_qa.DEFAULTS, "max_length": max_length}
    config.auto_map = {QA_AUTO_CLASS: f"{QA_MODULE}.{QA_CLASS}"}
    weights = {f"canine.{k}": v for k, v in to_hf_state_dict(encoder).items()}
    for name, layer in heads.items():
        weights.update({f"{name}.{k}": v for k, v in layer.state_dict().items()})
    hf_model = _loaded(hf_qa.CanineForTydiQuestionAnswering(config), weights)

    def write_module(directory: str) -> None:
        shutil.copyfile(hf_qa.__file__, os.path.join(directory, f"{QA_MODULE}.py"))

    return _publish_hf(hf_model, path, max_length, files, write_module)


# The remote-code model of a TyDi QA export (training/hf_qa.py, copied in as QA_MODULE + ".py"),
# named in config.json's auto_map for QA_AUTO_CLASS.
QA_MODULE = "modeling_canine_tydiqa"
QA_CLASS = "CanineForTydiQuestionAnswering"
QA_AUTO_CLASS = "AutoModelForQuestionAnswering"


# The remote-code pipeline of a token classifier's export (training/hf_token.py, copied in as
# TOKEN_MODULE + ".py"), for these tasks of transformers.pipeline; the model is transformers' own.
TOKEN_MODULE = "pipeline_canine_token"
TOKEN_PIPELINE = "CanineTokenClassificationPipeline"
TOKEN_AUTO_CLASS = "AutoModelForTokenClassification"
TOKEN_TASKS = ("token-classification", "ner")  # "ner" is transformers' alias of the task


def _encoder_of(model, who: str) -> CanineModel:
    encoder = getattr(model, "encoder", model)
    if not isinstance(encoder, CanineModel):
        raise TypeError(f"{who} needs a CanineModel or a model with one as .encoder, got {type(model).__name__}")
    return encoder


def _loaded(hf_model, weights: dict[str, torch.Tensor]):
    """`hf_model` with `weights` in it, fp32. Strict: a key we forgot or invented fails here, not
    when someone loads the export."""
    hf_model.load_state_dict({k: v.detach().to(torch.float32) for k, v in weights.items()}, strict=True)
    return hf_model


def _publish_hf(hf_model, path, max_length: int, files: dict[str, bytes] | None, extra=None) -> str:
    """Publish (`publish`) `hf_model`'s config and weights, CANINE's tokenizer files
    (model_max_length `max_length`), `extra(directory)`'s files and `files`; returns `path`."""
    from transformers import CanineTokenizer

    # CANINE's tokenizer has no vocabulary: its config alone (the special codepoints, the length).
    tokenizer = CanineTokenizer(model_max_length=max_length)

    def write(directory: str) -> None:
        with _progress_bars_off():
            hf_model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        if extra is not None:
            extra(directory)
        for name, data in (files or {}).items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)

    publish(write, str(path))
    return str(path)


# The remote-code model of an export (training/hf_masked.py, copied in as MASKED_MODULE + ".py").
MASKED_MODULE = "modeling_canine_masked"
MASKED_CLASS = "CanineForMaskedPrediction"
MASKED_PIPELINE = "CanineFillMaskPipeline"
# The Auto class config.json's auto_map names: it is the one people reach for to predict masked
# input (transformers' "fill-mask"); AutoModelForPreTraining would promise BERT's MLM + NSP pair.
MASKED_AUTO_CLASS = "AutoModelForMaskedLM"
# The head's tensors, named as in CanineForMaskedPrediction's state dict, go in a file of their own
# (hf_masked.HEAD_FILE): model.safetensors stays exactly a CanineModel's, which `AutoModel` loads
# without a load report (with them inside, transformers listed each as UNEXPECTED).
HEAD_PREFIX = "pretraining_head."


def masked_head(model, subword_vocab: list[str] | None = None) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config.json's `pretraining_head`, the head's tensors under HEAD_PREFIX) of a
    CaninePretrainingModel. Its module and tensor names are training/heads.py's, so the tensors
    go across as they are; they are loaded strictly into hf_masked's head here, so a name
    that differs fails at export, not when someone loads the export."""
    from transformers import CanineConfig as HFConfig

    from training import hf_masked

    config = model.encoder.config
    hf_config = HFConfig(**hf_config_dict(config))
    if model.objective == "char":
        spec = {"objective": "char", "char_reveal": config.char_reveal}
        module = hf_masked.CharHead(hf_config, config.char_reveal)
    else:
        if subword_vocab is not None and len(subword_vocab) != config.num_subword_vocab:
            raise ValueError(f"the subword vocabulary has {len(subword_vocab)} tokens, the model's CANINE-S head "
                             f"{config.num_subword_vocab}: it was trained on other data; export with that data's "
                             "tokenizer")
        spec = {"objective": "subword", "vocab_size": config.num_subword_vocab}
        module = hf_masked.SubwordHead(hf_config, config.num_subword_vocab)
    tensors = {k.removeprefix("head."): v.detach().to(torch.float32).contiguous()
               for k, v in model.state_dict().items() if k.startswith("head.")}
    module.load_state_dict(tensors, strict=True)
    return spec, {f"{HEAD_PREFIX}{k}": v for k, v in tensors.items()}


def _write_head(directory: str, tensors: dict[str, torch.Tensor], subword_vocab: list[str] | None,
                char_inventory: dict | None = None) -> None:
    """Write the head's tensors beside model.safetensors (hf_masked.HEAD_FILE), with the
    remote-code module, CANINE-S vocabulary and character inventory."""
    from safetensors.torch import save_file

    from training import hf_masked

    save_file(tensors, os.path.join(directory, hf_masked.HEAD_FILE), metadata={"format": "pt"})
    shutil.copyfile(hf_masked.__file__, os.path.join(directory, f"{MASKED_MODULE}.py"))
    if subword_vocab is not None:
        with open(os.path.join(directory, hf_masked.SUBWORD_VOCAB_FILE), "w", encoding="utf-8") as f:
            json.dump(subword_vocab, f, ensure_ascii=False)
    if char_inventory is not None:
        with open(os.path.join(directory, hf_masked.INVENTORY_FILE), "w", encoding="utf-8") as f:
            json.dump(char_inventory, f, separators=(",", ":"))


def subword_vocab_of(data_path: str) -> list[str] | None:
    """CANINE-S's vocabulary, the tokens by id, from the tokenizer of the shards at `data_path`
    (contract/schema.py TOKENIZER); None where it is missing or unreadable (the export then
    names no subwords, its encoder is unaffected)."""
    import fsspec
    from tokenizers import Tokenizer

    from contract import schema
    from contract.files import join

    try:
        raw = None
        if data_path:
            fs, path = fsspec.core.url_to_fs(join(data_path, schema.TOKENIZER))
            raw = fs.cat_file(path) if fs.exists(path) else None
        vocab = Tokenizer.from_str(raw.decode("utf-8")).get_vocab(with_added_tokens=True) if raw else {}
    except Exception:  # OSError reading it; the tokenizers library raises a bare Exception on bad JSON
        return None
    tokens = sorted(vocab, key=vocab.get)
    return tokens if [vocab[t] for t in tokens] == list(range(len(tokens))) and tokens else None


# Written last into an export: its files and their sha256. On an object store, where a folder
# cannot be renamed into place, an export without it is incomplete (or being replaced).
EXPORT_MARKER = "canine_export.json"


@contextlib.contextmanager
def _progress_bars_off():
    """transformers' "Writing model shards" bar would be a run's only third-party console line."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _write_marker(directory: str) -> None:
    from contract.files import file_sha256

    names = sorted(os.listdir(directory))
    record = {"files": {n: file_sha256(os.path.join(directory, n)) for n in names if n != EXPORT_MARKER}}
    with open(os.path.join(directory, EXPORT_MARKER), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)


def publish(write, url: str) -> None:
    """Make `write(local_directory)`'s files appear at `url` whole, replacing what was there.

    On a local disk they are written into a hidden folder beside the target, which is then
    renamed into place (an old export renamed aside first, then removed): readers see the old
    export, then for the instant between two renames none, then the new one; never a mix, and a
    failure leaves the old one in place. On an object store they are written locally, the old
    marker is deleted, the files are uploaded (any file of the old export that the new one
    lacks is deleted) and the marker is uploaded last. The target must be new, empty or an
    earlier export (it is replaced whole)."""
    import fsspec

    from contract.files import is_local

    fs, path = fsspec.core.url_to_fs(url)
    path = path.rstrip("/")
    if fs.isfile(path):
        raise ValueError(f"{url} is a file; an export is a directory")
    if fs.isdir(path):  # replaced whole: only ever an earlier export (or nothing)
        entries = fs.ls(path, detail=True)
        names = {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries}
        if entries and (any(e["type"] == "directory" for e in entries) or not names & {EXPORT_MARKER, "config.json"}):
            raise ValueError(f"{url} holds other things than a Hugging Face export; it would be replaced whole: "
                             "export to a new or empty directory")
    if is_local(fs):
        parent, name = os.path.split(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
        old = None
        try:
            write(staging)
            _write_marker(staging)
            os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the export from other users
            if os.path.exists(path):
                old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
                os.rename(path, os.path.join(old, name))
            os.rename(staging, path)
        except BaseException:
            if old and not os.path.exists(path):
                os.rename(os.path.join(old, name), path)  # the old export back in place
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if old:
            shutil.rmtree(old, ignore_errors=True)
        return
    with tempfile.TemporaryDirectory(prefix="canine-export-") as local:
        write(local)
        _write_marker(local)
        marker = f"{path}/{EXPORT_MARKER}"
        if fs.exists(marker):
            fs.rm_file(marker)
        names = set(os.listdir(local))
        if fs.isdir(path):
            for old in fs.ls(path, detail=False):
                if old.rstrip("/").rsplit("/", 1)[-1] not in names and fs.isfile(old):
                    fs.rm_file(old)
        for name in sorted(names - {EXPORT_MARKER}) + [EXPORT_MARKER]:
            fs.put_file(os.path.join(local, name), f"{path}/{name}")


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
