"""contract/extras.py: the hint for a missing extra is a pip command that works. canine-pretrain is
on no package index, so `pip install 'canine-pretrain[hf]'` cannot; the hint names the extra's own
requirements, the ones pyproject.toml lists for it."""

import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from contract import extras

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name(req: str) -> str:
    return req.partition("[")[0].partition("=")[0].strip().lower()


@pytest.mark.parametrize("extra", ["train", "hf", "tracking", "variants", "dask"])
def test_the_hint_names_what_pyproject_lists_for_the_extra(extra):
    hint = extras.install_hint(extra)
    assert hint.startswith("pip install '") and "canine-pretrain" not in hint
    named = [req.strip("'") for req in hint.removeprefix("pip install ").split("' '")]
    assert sorted(map(_name, named)) == sorted(map(_name, OPTIONAL[extra]))
    assert all("==" in req for req in named)  # pinned as pyproject pins them


def test_the_variants_hint_is_the_pinned_zhconv():
    assert extras.install_hint("variants") == "pip install 'zhconv-rs==0.4.2'"


def test_without_the_metadata_the_checkout_form(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "requires", missing)
    monkeypatch.setattr(metadata, "version", missing)
    assert extras.install_hint("hf") == "pip install -e '.[hf]' in the project's checkout"
    assert extras.project_hint("train").endswith("pip install 'dist/canine_pretrain-<version>-py3-none-any.whl[train]'")


def test_the_project_hint_names_the_checkout_and_the_wheel():
    hint = extras.project_hint("train")
    assert hint.startswith("pip install -e '.[train]' in a checkout")
    assert f"dist/canine_pretrain-{metadata.version('canine-pretrain')}-py3-none-any.whl[train]" in hint
