"""`canine smoke` end to end, shortened: real Beam, real local Ray cluster, real DeepSpeed."""

import pytest

from jobs import cli
from pipeline import contract

pytestmark = pytest.mark.slow


def test_smoke_writes_shards_run_curve_and_export(tmp_path, capsys):
    assert cli.main(["smoke", "--output", str(tmp_path), "--steps", "8", "--seq-len", "256"]) == 0
    out = capsys.readouterr().out
    for what in ("[1/3]", "[2/3]", "[3/3]", "validation", "characters/s", "smoke run finished"):
        assert what in out
    assert (tmp_path / "shards" / contract.MANIFEST).exists()
    run = tmp_path / "train"
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "hf" / "config.json").exists() and any((run / "tensorboard").iterdir())
