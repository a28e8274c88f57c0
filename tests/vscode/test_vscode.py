"""The VS Code extension in a real VS Code: code-server 4.139.1 (VS Code 1.139.1) driven by Debian's Chromium.

The .vsix is built exactly as the README says, in a clean copy of editors/vscode (`npm ci && npm run
package`), installed with a test-only probe extension (tests/vscode/probe) that checks, through VS Code's API
inside the real extension host, that the server starts, diagnostics arrive, the hover shows GiB and seconds,
"Apply optimal strategy" rewrites the file keeping its comments, the "▸ Plan view" lens returns the explain
data and opens the plan view panel, and the commands exist. The browser driver
(tests/vscode/e2e.mjs) screenshots every step into out/vscode-e2e/ (CI keeps them) and checks the Problems
panel, the hover widget, the quick-fix menu, the plan view's page (timeline, memory chart, every stage) and
the palette. Tools come from tests/vscode/setup.sh (cached
under ~/.cache/hp-lsp-e2e). Under CI=true nothing here may skip: missing tools fail the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = REPO / "out" / "vscode-e2e"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CI = os.environ.get("CI") == "true"


def missing(what: str) -> None:
    if CI:
        pytest.fail(f"{what} is required in CI (.ci/run installs it)")
    pytest.skip(f"{what} not available (see editors/README.md, 'Testing in the real editors')")


def tools() -> Path:
    """The cached Node 24 + code-server + playwright-core; installed here only under CI (90 s, 0.8 GB)."""
    if not Path(CHROMIUM).exists():
        missing("chromium")
    if shutil.which("npm") is None:
        missing("npm")
    probe = subprocess.run(["sh", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=1800,
                           env={**os.environ, "HP_LSP_E2E_CHECK_ONLY": "" if CI else "1"})
    if probe.returncode != 0:
        if CI:
            pytest.fail(f"tests/vscode/setup.sh failed:\n{probe.stderr[-3000:]}")
        missing("the cached code-server (run `sh tests/vscode/setup.sh`)")
    return Path(probe.stdout.strip().splitlines()[-1])


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def build_vsix(tmp: Path) -> tuple[Path, Path]:
    """The README's `(cd editors/vscode && npm ci && npm run package)` in a clean copy of the checkout's files
    (tracked and new, not ignored: no node_modules, out/ or dist/),
    and the probe packaged with the same vsce."""
    files = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "editors/vscode"], REPO).split()
    for f in files:
        dest = tmp / "checkout" / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest)
    ext = tmp / "checkout" / "editors" / "vscode"
    # The README's words; npm's own settings keep it off the network where its cache has the packages.
    quiet = {**os.environ, "npm_config_prefer_offline": "true", "npm_config_audit": "false",
             "npm_config_fund": "false", "npm_config_update_notifier": "false"}
    run(["sh", "-c", "npm ci && npm run package"], ext, quiet)
    probe = tmp / "probe"
    shutil.copytree(HERE / "probe", probe)
    run([str(ext / "node_modules" / ".bin" / "vsce"), "package", "--no-dependencies", "--skip-license",
         "--allow-missing-repository", "--out", "probe.vsix"], probe)
    return ext / "hp-lsp.vsix", probe / "probe.vsix"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def workspace(tmp: Path) -> Path:
    ws = tmp / "workspace"
    shutil.copytree(REPO / "examples" / "llama3-70b", ws)
    return ws


def code_server_env(cache: Path, tmp: Path, verdict: Path, train: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{cache / 'node' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        # Keep code-server's files in the run folder, and the workbench off the network (a closed port).
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "EXTENSIONS_GALLERY": json.dumps({"serviceUrl": f"http://127.0.0.1:{free_port()}/gallery"}),
        "HP_LSP_E2E_VERDICT": str(verdict),
        "HP_LSP_E2E_TRAIN": str(train),
    }


def broken_interpreter(tmp: Path) -> dict[str, str]:
    """An "interpreter" that fails as a Python without hp-lsp does, counting its runs (a restart would add one)."""
    count, script = tmp / "broken-runs.txt", tmp / "broken-python"
    script.write_text(f'#!/bin/sh\necho run >> "{count}"\n'
                      'echo "$0: No module named hp_lsp" >&2\nexit 1\n')
    script.chmod(0o755)
    return {"interpreter": str(script), "count": str(count)}


def report(title: str, checks: list[dict]) -> str:
    return title + "\n" + "\n".join(f"  {'ok ' if c['ok'] else 'BAD'} {c['name']}: "
                                    f"{json.dumps(c['detail'])[:600] if not c['ok'] else ''}" for c in checks)


def test_extension_in_real_vscode(tmp_path: Path) -> None:
    cache = tools()
    started = time.monotonic()
    vsix, probe_vsix = build_vsix(tmp_path)
    ws = workspace(tmp_path)
    data, exts = tmp_path / "user-data", tmp_path / "extensions"
    settings = json.dumps({
        "hpLsp.interpreter": sys.executable,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "update.mode": "none",
        "chat.disableAIFeatures": True,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
    })
    # code-server is a remote: machine-scoped settings (hpLsp.interpreter) are read from Machine/, not User/.
    for scope in ("User", "Machine"):
        (data / scope).mkdir(parents=True)
        (data / scope / "settings.json").write_text(settings)
    verdict = tmp_path / "verdict.json"
    env = code_server_env(cache, tmp_path, verdict, ws / "train.yaml")
    env["HP_LSP_E2E_BREAK"] = json.dumps(broken_interpreter(tmp_path))
    cs = [str(cache / "code-server" / "bin" / "code-server"), "--user-data-dir", str(data), "--extensions-dir",
          str(exts), "--config", str(tmp_path / "code-server.yaml")]
    timings = {"vsix": time.monotonic() - started}
    run([*cs, "--install-extension", str(vsix), "--install-extension", str(probe_vsix)], tmp_path, env, timeout=180)
    timings["install"] = time.monotonic() - started
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    with open(OUT / "code-server.log", "w") as log:
        driver = drive(cs, ws, tmp_path, env, verdict, cache, log)
    timings["editor"] = time.monotonic() - started
    if verdict.exists():
        shutil.copy2(verdict, OUT / "verdict.json")
    probe = json.loads(verdict.read_text()) if verdict.exists() else {"checks": []}
    ui = json.loads((OUT / "ui.json").read_text()) if (OUT / "ui.json").exists() else {"checks": []}
    text = (report("probe (extension host):", probe["checks"]) + "\n" + report("browser:", ui["checks"])
            + f"\ndriver rc {driver.returncode}: {driver.stderr[-2000:]}\n"
            + "seconds since start: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(text)
    assert probe.get("done") and probe["checks"] and all(c["ok"] for c in probe["checks"]), text
    assert ui["checks"] and all(c["ok"] for c in ui["checks"]) and driver.returncode == 0, text
    assert len(ui["screenshots"]) >= 12, text


def drive(cs: list[str], ws: Path, tmp_path: Path, env: dict[str, str], verdict: Path, cache: Path,
          log: IO[str]) -> subprocess.CompletedProcess[str]:
    """Start code-server on a free port, run the browser driver against it, stop code-server's process group."""
    port = free_port()
    server = subprocess.Popen([*cs, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
                               "--disable-update-check", "--disable-workspace-trust", str(ws)],
                              cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("code-server did not listen within 60 s; see out/vscode-e2e/code-server.log")
        driver = subprocess.run(
            [str(cache / "node" / "bin" / "node"), str(HERE / "e2e.mjs"), f"http://127.0.0.1:{port}/?folder={ws}",
             str(verdict), str(OUT), str(cache / "playwright")],
            env={**env, "CHROMIUM": CHROMIUM}, capture_output=True, text=True, timeout=360)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    return driver
