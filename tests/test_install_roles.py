"""The base install (preprocessing) is enough for `preprocess`, `inspect` and `validate`.

Without building a venv: the base install's packages are the closure of pyproject.toml's
`dependencies` over the installed packages' own requirements (markers and extras honoured);
every other installed distribution (torch, DeepSpeed, Ray, transformers, pandas, ...) is made
unimportable in every Python process the commands start, Beam's workers included, by a
sitecustomize on PYTHONPATH. (A real base install in a fresh venv found the same gap this test
now guards: pyarrow's to_pandas_dtype() importing pandas.)
"""

import json
import re
import subprocess
import sys
import tomllib
import pytest

from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "pipeline" / "sample" / "kowiki-20261101-pages-articles.xml"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ALWAYS = {"canine-pretrain", "pip", "setuptools", "wheel"}  # the project itself, the installer

BLOCKER = """
import sys

BLOCKED = {blocked!r}

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: not in the base install)", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def base_closure() -> set[str]:
    """Distributions a `pip install canine-pretrain` (no extras) brings, as installed here."""
    seen, todo = set(), [Requirement(r) for r in PROJECT["dependencies"]]
    while todo:
        req = todo.pop()
        key = (_canon(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = distribution(req.name).requires or []
        except PackageNotFoundError:  # not installed here, so not needed here either
            continue
        for text in requires:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return {name for name, _ in seen}


def blocked_modules() -> set[str]:
    """Top-level modules that only distributions outside the base install provide."""
    keep = base_closure() | ALWAYS
    return {module for module, dists in packages_distributions().items()
            if not any(_canon(d) in keep for d in dists) and not module.startswith("_")}


def test_the_base_install_lacks_the_training_stack_and_has_the_pipeline():
    blocked = blocked_modules()
    assert {"torch", "deepspeed", "ray", "transformers", "matplotlib", "tensorboard", "pandas"} <= blocked
    assert not {"apache_beam", "pyarrow", "fsspec", "s3fs", "gcsfs", "tokenizers", "mwparserfromhell", "yaml"} & blocked


@pytest.mark.slow  # the Beam job end to end
def test_preprocess_inspect_and_validate_run_on_the_base_install_alone(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked_modules())))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path / "site")}
    out = str(tmp_path / "out")

    def canine(*args):
        r = subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert "blocked: not in the base install" in probe.stderr  # the blocker is in force
    # 2 workers: Beam's worker processes start with the blocker too
    canine("preprocess", str(SAMPLE), "--output", out, "--seq-len", "512", "--vocab-size", "600", "--workers", "2")
    assert json.loads(canine("inspect", out, "--json").stdout)["splits"]["train"]["rows"] > 0
    assert "valid" in canine("validate", out).stdout
