"""Start-up of `hp-plan` (D-016): `check` loads neither numpy nor the search, the version needs no
package-metadata lookup, and numpy's BLAS gets one thread unless the user chose otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import engine
from engine.cli import BLAS_THREAD_VARS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "llama3-70b" / "search.yaml"

# Runs the CLI in a fresh interpreter, then reports which modules it loaded and the BLAS variables.
PROBE = """
import json, sys, os, io, contextlib
from engine.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'engine', 'importlib'))
print(json.dumps({"code": code, "modules": mods,
                  "env": {v: os.environ.get(v) for v in VARS}}))
""".replace("VARS", repr(BLAS_THREAD_VARS))


def _probe(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    full_env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                         env=full_env, check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_check_loads_neither_numpy_nor_the_search() -> None:
    r = _probe("check", str(EXAMPLE))
    assert r["code"] == 0
    mods = r["modules"]
    assert isinstance(mods, list)
    assert "engine.check" in mods  # the probe saw the check run
    assert not [m for m in mods if m == "numpy" or m.startswith("numpy.")]
    assert not [m for m in mods if m.startswith(("engine.search", "engine.cost"))]
    assert "importlib.metadata" not in mods


def test_search_gets_one_blas_thread_unless_the_user_chose() -> None:
    r = _probe("search", str(EXAMPLE))
    assert r["code"] == 0 and "numpy" in r["modules"]  # type: ignore[operator]
    assert r["env"] == {v: "1" for v in BLAS_THREAD_VARS}
    r = _probe("check", str(EXAMPLE), env={"OPENBLAS_NUM_THREADS": "4"})
    assert r["env"]["OPENBLAS_NUM_THREADS"] == "4"  # type: ignore[index]


def test_version_is_the_package_version() -> None:
    out = subprocess.run([sys.executable, "-m", "engine.cli", "--version"], capture_output=True, text=True,
                         cwd=ROOT, check=True, timeout=60)
    assert out.stdout.strip() == f"hp-plan {engine.__version__}"
    assert engine.__version__ == version("hp-lsp")
