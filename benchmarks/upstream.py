"""HyperParallel's own shipped YAML files, read as hp-plan reads them (D-005).

Runs `hp-plan check`, `estimate` and `search` (--json, in a subprocess each: the interface a user touches) on
every .yaml/.yml under ../shared/reference/upstream (relative to the repository), or under the folder --dir names
(every YAML file of a repository checkout, its operator tables and CI files included), and prints per file what
each command says: the file kind, counts of errors / warnings / information and hints, and the codes, then the
file's verdict from `check` (clean, or the codes of its errors and warnings). A closing summary counts files with
check errors, with check warnings, crashes (a traceback, no JSON, a timeout) and HP900s.
The folder is reference data and not part of the repository: the benchmark skips with a message when it is
absent. Run: `.venv/bin/python benchmarks/upstream.py [--dir DIR] [--no-search]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATES = (os.path.join(ROOT, "..", "shared", "reference", "upstream"),
              os.path.join(ROOT, "..", "..", "shared", "reference", "upstream"))
TIMEOUT_S = 300


def find_dir(given: str | None) -> str | None:
    for d in ([given] if given else list(CANDIDATES)):
        if d and os.path.isdir(d):
            return os.path.normpath(d)
    return None


def yaml_files(top: str) -> list[str]:
    out = []
    for base, _dirs, files in os.walk(top):
        out += [os.path.join(base, f) for f in files if f.endswith((".yaml", ".yml"))]
    return sorted(out)


def run(cmd: str, path: str) -> tuple[dict | None, str, float]:
    """(JSON document or None, what went wrong, seconds)."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "engine.cli", cmd, path, "--json"], capture_output=True,
                           text=True, cwd=ROOT, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {TIMEOUT_S} s", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    if "Traceback" in r.stderr:
        return None, "traceback: " + r.stderr.strip().splitlines()[-1], dt
    try:
        return json.loads(r.stdout), "", dt
    except json.JSONDecodeError:
        return None, f"no JSON (exit {r.returncode})", dt


def said(doc: dict) -> tuple[Counter, list[str]]:
    sev: Counter = Counter()
    codes: list[str] = []
    for d in doc.get("diagnostics", []):
        sev[d["severity"]] += 1
        codes.append(d["code"])
    return sev, codes


def line(cmd: str, doc: dict | None, problem: str, dt: float) -> str:
    if doc is None:
        return f"  {cmd:8s} CRASH {problem}"
    sev, codes = said(doc)
    counts = (f"{sev['error']} err, {sev['warning']} warn, {sev['information']} info"
              + (f", {sev['hint']} hint" if sev["hint"] else ""))
    what = ""
    if cmd == "estimate" and doc.get("peak_memory_gib") is not None:
        what = f" peak {doc['peak_memory_gib']:.1f} GiB, step {doc.get('step_time_s', 0):.3g} s"
    if cmd == "search" and doc.get("best"):
        what = f" best: {doc['best'].get('strategy', {}).get('dp')}dp·{doc['best'].get('strategy', {}).get('tp')}tp·" \
               f"{doc['best'].get('strategy', {}).get('pp')}pp of {doc.get('evaluated', 0):,} in {dt:.1f} s"
    tally = ", ".join(f"{c}×{n}" if n > 1 else c for c, n in sorted(Counter(codes).items()))
    return f"  {cmd:8s} {counts}{what}  [{tally}]"


def verdict(errors: list[str], warnings: list[str]) -> str:
    """One file's verdict from `check`: clean, or the codes it errs and warns with."""
    if not errors and not warnings:
        return "clean (no error, no warning)"
    parts = [f"errors {', '.join(sorted(set(errors)))}" if errors else "",
             f"warnings {', '.join(sorted(set(warnings)))}" if warnings else ""]
    return "; ".join(p for p in parts if p)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="folder of upstream YAML files (default ../shared/reference/upstream)")
    ap.add_argument("--no-search", action="store_true", help="check and estimate only")
    args = ap.parse_args()
    top = find_dir(args.dir)
    if top is None:
        print("skipped: no ../shared/reference/upstream folder next to the repository (give --dir)")
        return 0
    files = yaml_files(top)
    cmds = ("check", "estimate") if args.no_search else ("check", "estimate", "search")
    with_errors: list[str] = []
    with_warnings: list[str] = []
    crashes: list[str] = []
    kinds: Counter = Counter()
    for path in files:
        rel = os.path.relpath(path, top)
        print(rel)
        for cmd in cmds:
            doc, problem, dt = run(cmd, path)
            print(line(cmd, doc, problem, dt))
            if doc is None or "HP900" in said(doc)[1]:
                crashes.append(f"{rel} ({cmd})")
            if cmd == "check" and doc is not None:
                kinds[doc.get("kind") or "left alone (HP008)"] += 1
                errs = [d["code"] for d in doc.get("diagnostics", []) if d["severity"] == "error"]
                warns = [d["code"] for d in doc.get("diagnostics", []) if d["severity"] == "warning"]
                if errs:
                    with_errors.append(f"{rel}: {', '.join(sorted(set(errs)))}")
                if warns:
                    with_warnings.append(f"{rel}: {', '.join(sorted(set(warns)))}")
                print(f"  verdict  {verdict(errs, warns)}")
    print()
    print(f"summary: {len(files)} files ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
          f"{len(crashes)} crashes; {len(with_errors)} with check errors; {len(with_warnings)} with check warnings; "
          f"{len({e.split(': ')[0] for e in with_errors + with_warnings})} with either")
    for e in with_errors:
        print(f"  check errors: {e}")
    for w in with_warnings:
        print(f"  check warnings: {w}")
    for c in crashes:
        print(f"  crash: {c}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
