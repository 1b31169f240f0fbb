"""`export_run` (training/train/export.py) and `canine export` (jobs/export.py): a finished run -> a
directory AutoModel and AutoTokenizer load offline, with a model card; published whole, locally
and on an object store; pretraining says where it exported, or why not."""

import json
import os

import fsspec
import pytest
import torch
import yaml

from contract import schema
from contract.manifest import read_manifest
from training.train import rundir
from training.train.export import ExportError, export_run
from training.heads import CaninePretrainingModel
from training.hf import EXPORT_MARKER, to_hf_state_dict
from training.train.rundir import CONSOLIDATED
from training.train import config
from training.train.checkpoint import save_consolidated

SEQ_LEN = 256


def write_run(root: str, data: str) -> CaninePretrainingModel:
    """What a finished `canine pretrain` leaves that an export reads, for the tiny model."""
    cfg = config.load_config("tiny", {"output": root, "data.path": data, "data.seq_len": SEQ_LEN,
                                          "train.max_steps": 4, "parallel.workers": 2, "parallel.device": "cpu",
                                          "parallel.precision": "fp32"})
    fs, path = fsspec.core.url_to_fs(root)
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(f"{path}/config.yaml", config.to_yaml(cfg).encode())
    records = [{"step": s, "loss": 8.0 - s, "accuracy": 0.01 * s} for s in range(1, 5)]
    records[1].update(eval_loss=6.5, eval_accuracy=0.02)
    records[3].update(eval_loss=5.25, eval_accuracy=0.0625)
    fs.pipe_file(f"{path}/metrics.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode())
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    save_consolidated(model.state_dict(), f"{root.rstrip('/')}/{CONSOLIDATED}")
    return model


@pytest.fixture()
def shards(contract_shards):
    return contract_shards


def _load_and_check(directory, model):
    from transformers import AutoModel, AutoTokenizer, CanineModel, CanineTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    hf = AutoModel.from_pretrained(directory).eval()
    assert isinstance(tokenizer, CanineTokenizer) and isinstance(hf, CanineModel)
    assert tokenizer.model_max_length == SEQ_LEN
    batch = tokenizer(["ab", "한국어 text"], padding=True, return_tensors="pt")
    assert batch["input_ids"][0, :4].tolist() == [0xE000, ord("a"), ord("b"), 0xE001]  # CLS a b SEP
    with torch.no_grad():
        assert hf(**batch).last_hidden_state.shape[:2] == batch["input_ids"].shape
    theirs = hf.state_dict()
    for key, tensor in to_hf_state_dict(model.encoder).items():  # the run's weights (parity: test_hf.py)
        assert torch.equal(theirs[key], tensor), key


def test_a_run_exports_with_tokenizer_and_model_card(tmp_path, shards, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # everything from the directory, nothing from a hub
    run = str(tmp_path / "run")
    model = write_run(run, shards)
    assert export_run(run) == f"{run}/hf"
    _load_and_check(f"{run}/hf", model)
    card = (tmp_path / "run" / "hf" / "README.md").read_text()
    data = read_manifest(shards)
    for expected in ("library_name: transformers", "- en", f"config sha256 `{data.config_sha256}`",
                     "steps: 4 of 4", "| 2 | 6.5000 | 0.0200 |", "| 4 | 5.2500 | 0.0625 |", "size: tiny",
                     f"{SEQ_LEN} characters", f"train {data.splits['train'].rows} examples",
                     # the task the export answers, and its call (a user's report: the card said feature-extraction)
                     "pipeline_tag: fill-mask", 'fill = pipeline("fill-mask", model=PATH, trust_remote_code=True)',
                     'fill(f"The capital of France is P{fill.tokenizer.mask_token * 4}.", top_k=3)',
                     "- licence of the text: not recorded: the manifest names no input files"):  # synthetic shards
        assert expected in card, expected
    marker = json.loads((tmp_path / "run" / "hf" / EXPORT_MARKER).read_text())
    assert set(marker["files"]) >= {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"}
    # Again, over the first: replaced whole, nothing left beside it.
    export_run(run, to=str(tmp_path / "run" / "hf"))
    assert sorted(os.listdir(tmp_path / "run")) == ["config.yaml", "final", "hf", "metrics.jsonl"]


def test_the_model_card_names_the_texts_licence_from_the_inputs():
    """Wikimedia dumps' text is CC BY-SA (and GFDL); other inputs' licence is not recorded, and not guessed."""
    from training.train.export import WIKIPEDIA_LICENCE, data_licence

    dumps = ["gs://b/enwiki-20261101-pages-articles-multistream.xml.bz2", "/data/kowiki/20261101/"
             "kowiki-20261101-pages-articles.xml", "zh_yuewiki-latest-pages-articles.xml.gz"]
    assert data_licence(dumps) == (f"the inputs are Wikimedia dumps (by their file names): {WIKIPEDIA_LICENCE}; "
                                   "reusing the text means crediting them and sharing alike")
    assert "CC BY-SA" in WIKIPEDIA_LICENCE and "https://dumps.wikimedia.org/legal.html" in WIKIPEDIA_LICENCE
    assert data_licence([*dumps, "rows/pages.jsonl"]).startswith("3 of 4 input files are Wikimedia dumps (")
    assert data_licence(None) == data_licence([]) == "not recorded: the manifest names no input files"


def test_the_export_carries_the_train_splits_characters_with_counts(tmp_path, shards):
    """char_inventory.json: every codepoint of the train split (specials left out), counted, most
    frequent first; CANINE-C's fill answers a bucket with one of them (training/hf_masked.py)."""
    import collections

    import pyarrow.parquet as pq

    from training.train import data
    from training.train.export import char_inventory

    run = str(tmp_path / "run")
    write_run(run, shards)
    export_run(run)
    inventory = json.loads((tmp_path / "run" / "hf" / "char_inventory.json").read_text())
    dataset = data.open_dataset(shards)
    counted = collections.Counter()
    for shard in dataset.splits["train"]:
        for codepoints in pq.read_table(shard.url, columns=["codepoints"]).column("codepoints").to_pylist():
            counted.update(c for c in codepoints if c and not schema.CLS <= c <= schema.RESERVED)
    assert dict(map(tuple, inventory["counts"])) == dict(counted) and inventory["complete"]
    counts = [n for _, n in inventory["counts"]]
    assert counts == sorted(counts, reverse=True) and inventory["codepoints"] > sum(counts)  # + CLS and SEPs
    part = char_inventory(dataset, budget=1)  # one row group, then the budget is spent
    assert not part["complete"] and 0 < part["codepoints"] < inventory["codepoints"]


def test_what_cannot_be_exported_says_why(tmp_path, shards):
    with pytest.raises(rundir.NotARun, match="no config.yaml"):
        export_run(str(tmp_path / "nothing"))
    run = str(tmp_path / "run")
    write_run(run, shards)
    os.remove(f"{run}/{CONSOLIDATED}")
    with pytest.raises(ExportError, match="no consolidated weights .* after the run's last step"):
        export_run(run)
    assert not os.path.exists(f"{run}/hf")


def test_an_export_on_a_store_is_whole_once_its_marker_is_there(s3_store, tmp_path, shards, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run, fs = s3_store.url(), s3_store.fs()  # a fresh folder in the session's bucket
    model = write_run(run, shards)
    stale = f"{run}/hf/model-00001-of-00002.safetensors"  # a file of an earlier, sharded export
    fs.pipe_file(stale.removeprefix("s3://"), b"old")
    fs.pipe_file(f"{run.removeprefix('s3://')}/hf/config.json", b"{}")
    target = export_run(run)
    assert target == f"{run}/hf" and not fs.exists(stale.removeprefix("s3://"))
    assert fs.exists(f"{target.removeprefix('s3://')}/{EXPORT_MARKER}")
    fs.get(target.removeprefix("s3://") + "/", str(tmp_path / "hf") + "/", recursive=True)
    _load_and_check(str(tmp_path / "hf"), model)
    assert yaml.safe_load((tmp_path / "hf" / "README.md").read_text().split("---")[1])["language"] == sorted(read_manifest(shards).languages)


def test_pretraining_says_where_it_exported_or_why_not(tmp_path, shards, monkeypatch, capsys):
    import sys

    from training.train import run as run_mod

    run = str(tmp_path / "run")
    write_run(run, shards)
    cfg = config.from_dict(yaml.safe_load((tmp_path / "run" / "config.yaml").read_text()))
    monkeypatch.setitem(sys.modules, "transformers", None)  # as without the [hf] extra
    assert run_mod.export(cfg, f"{run}/{CONSOLIDATED}") is None
    err = capsys.readouterr().err
    assert "no Hugging Face export: transformers is not installed (pip install 'transformers==5.23.0' 'safetensors==0.8.0')" in err
    assert f"then: canine export {run}" in err and not os.path.exists(f"{run}/hf")
    monkeypatch.delitem(sys.modules, "transformers")
    assert run_mod.export(cfg, f"{run}/{CONSOLIDATED}") == f"{run}/hf"
    assert f"Hugging Face CanineModel exported to {run}/hf" in capsys.readouterr().err


def test_export_command_writes_where_told_and_refuses_clearly(tmp_path, capsys):
    from jobs import cli

    (tmp_path / "shards").mkdir()
    run = str(tmp_path / "run")
    write_run(run, str(tmp_path / "shards"))  # a run whose shards are gone: the card says so
    assert cli.main(["export", run, "--to", str(tmp_path / "out")]) == 0
    assert f"written to {tmp_path / 'out'}" in capsys.readouterr().out
    assert (tmp_path / "out" / "model.safetensors").exists()
    assert "_manifest.json not found" in (tmp_path / "out" / "README.md").read_text()
    assert cli.main(["export", str(tmp_path / "nowhere")]) == 2
    assert "canine export: " in capsys.readouterr().err


def test_a_folder_that_is_not_an_export_is_never_replaced(tmp_path, shards):
    run = str(tmp_path / "run")
    write_run(run, shards)
    (tmp_path / "home" / "work").mkdir(parents=True)
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds other things than a Hugging Face export"):
        export_run(run, to=str(tmp_path / "home"))
    assert (tmp_path / "home" / "notes.txt").read_text() == "mine" and (tmp_path / "home" / "work").is_dir()


def test_export_command_names_a_foreign_target_and_damaged_weights_in_one_line(tmp_path, shards, capsys):
    from jobs import cli

    run = str(tmp_path / "run")
    write_run(run, shards)
    (tmp_path / "home" / "work").mkdir(parents=True)
    assert cli.main(["export", run, "--to", str(tmp_path / "home")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"canine export: {tmp_path / 'home'} holds other things than a Hugging Face export")
    assert line.endswith("export to a new or empty directory")
    (tmp_path / "run" / CONSOLIDATED).write_bytes(b"not a torch file")  # a cut or damaged copy
    assert cli.main(["export", run, "--to", str(tmp_path / "out")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"canine export: {run}/{CONSOLIDATED}: unreadable consolidated weights (")
    assert "copy it again" in line and not (tmp_path / "out").exists()


def test_an_export_that_cannot_be_written_names_the_to_directory(tmp_path, capsys, monkeypatch):
    """A full disk or a refused write inside the hidden folder the files are written into
    (training/hf.py publish): the line names --to's directory, as given, not that folder."""
    import errno

    from jobs import cli
    from training import hf

    (tmp_path / "shards").mkdir()
    write_run(str(tmp_path / "run"), str(tmp_path / "shards"))

    def full(directory):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(directory, EXPORT_MARKER))

    monkeypatch.setattr(hf, "_write_marker", full)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))  # where the traceback file goes
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", "run", "--to", "exports/canine"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("canine export: exports/canine: the export could not be written there: No space left on "
                           "device; check the permissions and the free space there, or choose another --to "
                           "(the whole error: "), line
    assert ".partial-" not in line.split(" (the whole error: ")[0]
    assert os.listdir(tmp_path / "exports") == []  # the hidden folder removed
    whole = line.split(" (the whole error: ")[1][:-1]
    assert whole.startswith(str(tmp_path / "tmp")) and ".partial-" in open(whole).read()
