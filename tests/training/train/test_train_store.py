"""Pretraining where clusters run: data and output on object stores (moto's S3 server, the GCS
emulator; tests/conftest.py), one driver per output, and each rank downloading only its part of a
checkpoint. One uninterrupted run on gs:// is the reference for a run on s3:// stopped and resumed
by running the same command again."""

import json
import os
import re

import pytest

from contract import schema
from contract.lock import OutputLock
from jobs import cli
from training.train import rundir
from training.train import checkpoint, config
from training.train.run import pretrain

pytestmark = pytest.mark.slow

STEPS = 4
SETTINGS = {"train.max_steps": STEPS, "checkpoint.every": 2, "checkpoint.keep": 1, "train.eval_every": 0,
            "data.eval_examples": 16, "log.console_every": 1}


def _cfg(data, output, **extra):
    return config.load_config("tiny", {**SETTINGS, "data.path": data, "output": output, **extra})


def _upload(store, shards) -> str:
    url = store.url()  # a fresh folder: the buckets are the session's, shared by other tests
    store.fs().put(shards + "/", url.split("://", 1)[1], recursive=True)
    return url


def _files(store, url) -> list[str]:
    root = url.split("://", 1)[1]
    return sorted(p[len(root) + 1:] for p in store.fs().find(root))


def _assert_run_on_store(store, url, summary):
    """Everything a run keeps is on the store, under its output, and no lock is left behind."""
    files = _files(store, url)
    final = f"ray_train/checkpoint_{checkpoint.tag(STEPS)}"
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "final/model_fp32.pt", "hf/config.json",
                 "hf/model.safetensors", f"{final}/train_state.json", f"{final}/rng/rank1.pt"):
        assert name in files, (name, files)
    assert any(f.startswith("tensorboard/events.out.tfevents.") for f in files)
    assert not any(f.startswith(f"ray_train/checkpoint_{checkpoint.tag(2)}") for f in files)  # keep: 1
    assert schema.LOCK not in files
    assert summary["finished"] and summary["checkpoint"] == f"{url}/{final}"
    assert summary["hf_export"] == f"{url}/hf" and summary["consolidated"] == f"{url}/final/model_fp32.pt"
    with store.fs().open(f"{url}/summary.json", "rt") as f:
        assert json.load(f) == json.loads(json.dumps(summary))


@pytest.fixture(scope="module")
def reference(gcs_store, contract_shards, ray_local):
    """The uninterrupted run, data and output on gs://."""
    output = gcs_store.url()
    summary = pretrain(_cfg(_upload(gcs_store, contract_shards), output))
    return output, summary, rundir.read_metrics(output)


def test_a_run_on_gcs_keeps_everything_on_the_store(gcs_store, reference):
    output, summary, records = reference
    _assert_run_on_store(gcs_store, output, summary)
    assert [r["step"] for r in records] == list(range(1, STEPS + 1)) and "eval_loss" in records[-1]


@pytest.fixture(scope="module")
def resumed(s3_store, contract_shards, reference):
    """A run on s3:// stopped at step 2, then the same command again; and what the console showed."""
    data, output = _upload(s3_store, contract_shards), s3_store.url()
    stopped = pretrain(_cfg(data, output, **{"train.stop_at_step": 2}))
    assert stopped["steps"] == 2 and not stopped["finished"]
    return output, stopped, cli_resume(data, output)


def cli_resume(data, output):
    """`canine pretrain` again, as a user would: its summary and what it printed on stderr."""
    import contextlib
    import io

    import fsspec

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["pretrain", "--config", "tiny", "--data", data, "--output", output,
                         *(f"--set={k}={v}" for k, v in SETTINGS.items())])
    assert code == 0, err.getvalue()[-3000:]
    with fsspec.open(f"{output}/summary.json", "rt") as f:
        return json.load(f), err.getvalue()


def test_a_run_on_s3_resumes_from_the_store_with_the_same_losses(s3_store, reference, resumed):
    _, _, expected = reference
    output, stopped, (summary, console) = resumed
    _assert_run_on_store(s3_store, output, summary)
    records = rundir.read_metrics(output)
    assert [r["step"] for r in records] == [r["step"] for r in expected]
    for got, want in zip(records, expected):
        assert abs(got["loss"] - want["loss"]) <= 1e-6 * abs(want["loss"]), (got["step"], got["loss"], want["loss"])
    # The console showed each step of the resumed attempt (log.console_every 1) and none of the first.
    shown = re.findall(r"^\S+ \S+  step +(\d+/\d+)  loss", console, re.M)  # "<date> <time>  step 3/4  loss ..."
    assert shown == ["3/4", "4/4"], console


def test_each_rank_downloads_only_the_files_it_loads(s3_store, resumed):
    import ray.train

    from training.train.run import _storage

    output, _, _ = resumed
    storage = _storage(output)
    path = f"{storage['storage_path']}/{rundir.CHECKPOINTS}/checkpoint_{checkpoint.tag(STEPS)}"
    ckpt = ray.train.Checkpoint(path, filesystem=storage["storage_filesystem"])
    tag = f"{checkpoint.DS_DIR}/{checkpoint.tag(STEPS)}"
    on_store = _files(s3_store, f"{output}/{rundir.CHECKPOINTS}/checkpoint_{checkpoint.tag(STEPS)}")
    for rank in (0, 1):
        with checkpoint.rank_files(ckpt, rank) as local:
            got = sorted(os.path.relpath(os.path.join(d, f), local) for d, _, fs in os.walk(local) for f in fs)
        assert got == sorted([checkpoint.STATE_FILE, checkpoint.SHAPES_FILE, f"{checkpoint.RNG_DIR}/rank{rank}.pt",
                              f"{tag}/mp_rank_00_model_states.pt", f"{tag}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"])
        assert not os.path.exists(local)  # the copy is gone after the restore
    assert len(on_store) > len(got) + 2  # the other rank's files, DeepSpeed's 'latest' and scripts stay there


def test_a_second_driver_on_a_locked_output_refuses_and_names_the_holder(s3_store, contract_shards, ray_local, capsys):
    output = s3_store.url()
    with OutputLock(output, command="another canine pretrain --output " + output):
        code = cli.main(["pretrain", "--data", contract_shards, "--output", output, "--max-steps", "2"])
        assert _files(s3_store, output) == [schema.LOCK]  # nothing written beside the holder's lock
    assert code == 2
    err = capsys.readouterr().err
    assert f"output {output} is locked by another run" in err and "another canine pretrain" in err
    assert "step 1/" not in err
