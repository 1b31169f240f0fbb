"""tests/conftest.py gives Inductor's compiled kernels a folder per CPU setting: a cache that a run
under ATEN_CPU_CAPABILITY=avx2 (oneDNN and MKL limited to AVX2) left crashed the next run without
them (a segfault in libc10.so at the first compiled test)."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
# Python as pytest runs the conftest hook once the test modules (which import torch) are collected.
HOOK = ("import os, sys, torch; sys.path.insert(0, sys.argv[1]); import conftest; "
        "conftest.pytest_collection_finish(None); print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))")


def _chosen_dir(**env) -> str:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"TORCHINDUCTOR_CACHE_DIR", "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", *AVX2}}
    done = subprocess.run([sys.executable, "-c", HOOK, str(TESTS)], env={**clean, **env}, capture_output=True,
                          text=True, timeout=300, cwd=TESTS.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_cpu_setting_compiles_into_its_own_folder(tmp_path):
    default, avx2 = _chosen_dir(), _chosen_dir(**AVX2)
    assert default != avx2 and Path(default).parent == Path(avx2).parent
    assert Path(avx2).name == "aten-avx2_onednn-avx2_mkl-avx2"
    assert Path(default).name.startswith("aten-") and "onednn" not in Path(default).name
    # A folder the user chose is theirs, whatever the setting.
    assert _chosen_dir(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "mine"), **AVX2) == str(tmp_path / "mine")
