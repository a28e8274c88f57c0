"""Hostile inputs: wall time, CPU time and peak memory of `check_file` on each (D-001 targets).

Cases:
  * alias bomb ("billion laughs", 9 levels x 9 aliases) ...................... < 2 s, < 200 MB
  * 5 MB train.yaml, node-dense (100k flow mappings of 2 keys) .................. < 5 s
  * 5 MB train.yaml, long lines (20k list items of ~250 characters) .............. < 5 s
  * 5000 levels of flow nesting and 5000 levels of block nesting ................ bounded (refused)
  * 11 MB file (above the 10 MiB default cap) .................................... refused without parsing

Server and rewrite cases (`--server`, D-002, also run by default after the table above):
  * item 1: a search config whose train_yaml is a FIFO, /dev/stdin or /proc/self/fd/0, opened in the
    server: seconds until its HP009 arrives and until a documentSymbol request is answered; `hp-plan check`
    on it (a subprocess, stdin never written) ........................................... < 5 s, no hang
  * item 2: train_yaml = a /dev/zero node, a /dev/urandom node, a 2 GB sparse file: codeAction and the
    Apply command, their time and the server's RSS growth ................................. < 5 s, < 50 MB
  * item 6: the strategy rewrite with a comment of N ": " on a strategy line (N = 750 .. 24,000): time and
    Python heap peak; linear ................................................... 6,000 in < 0.5 s
  * item 7: server RSS over 10,000 incremental didChange edits, sampled every 2,000 .... < 0.2 KB/edit
Hostile numbers, calibration inputs and output errors (`--numbers`, also run by default): the cases and targets
of benchmarks/hostile_numbers.py (divisor searches, experts, the explain timeline and width, out-of-range values,
a 128 MiB log and impossible log values, stdout closed / full / gone), each in a fresh process.
Device nodes and FIFOs are made in a temporary folder (mknod as root, else a symlink to the system's node).

Each case runs in its own process, so its peak RSS (ru_maxrss) is its own. Wall time is the target; CPU time
(process_time) is printed beside it because this machine is shared and wall time stretches under load. Python
heap peak comes from a second, traced run (tracemalloc slows the run, so it is not timed).
Run: `.venv/bin/python benchmarks/hostile_inputs.py [--case NAME]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
import tracemalloc
from typing import Any

from lsp_stdio import reply_to_server, start_reader, start_server, write_message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MB = 1e6


def alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HEAD = ("model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
        "dataset:\n  data_transform:\n    max_seq_len: 4096\n  files:\n")


def dense_5mb() -> str:
    rows = "".join(f"    - {{path: /data/shard-{i:07d}.jsonl, weight: 0.5}}\n" for i in range(100_000))
    return HEAD + rows


def long_lines_5mb() -> str:
    rows = "".join(f"    - /data/corpus/{'x' * 230}/shard-{i:07d}.jsonl\n" for i in range(20_000))
    return HEAD + rows


def deep_flow() -> str:
    return "a: " + "[" * 5000 + "]" * 5000 + "\n"


def deep_block() -> str:
    return "a:\n  " + "- " * 5000 + "x\n"  # 5000 nested block sequences on one line


def oversized() -> str:
    return "a: 1\n" * (11 * 1024 * 1024 // 5)


CASES = {
    "alias_bomb": (alias_bomb, 2.0, 200.0),
    "dense_5mb": (dense_5mb, 5.0, None),
    "long_lines_5mb": (long_lines_5mb, 5.0, None),
    "deep_flow_5000": (deep_flow, 1.0, None),
    "deep_block_5000": (deep_block, 1.0, None),
    "oversized_11mb": (oversized, 1.0, None),
}


def run_case(name: str) -> dict[str, object]:
    from engine.check import check_file

    make, _, _ = CASES[name]
    text = make()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall0, cpu0 = time.perf_counter(), time.process_time()
    loaded = check_file(f"{name}.yaml", text=text)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    check_file(f"{name}.yaml", text=text)
    heap_peak = tracemalloc.get_traced_memory()[1] / MB
    tracemalloc.stop()
    return {
        "case": name,
        "size_mb": len(text.encode()) / MB,
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_mb": rss,
        "rss_before_mb": rss_before,
        "heap_peak_mb": heap_peak,
        "codes": sorted({d.code for d in loaded.diagnostics}),
    }


# -- D-002: the server and the rewriter against hostile files ------------------------------------------------
LLAMA = os.path.join(ROOT, "examples", "llama3-70b")


class Lsp:
    """A minimal LSP client over the server's stdio: requests wait for their answer; publishDiagnostics are
    kept by URI. Enough to time requests and read the server's RSS; no pygls on this side."""

    def __init__(self, root: str) -> None:
        self.proc = start_server()
        self.diags: dict[str, list[dict[str, object]]] = {}
        self.answers: dict[int, object] = {}
        self.cond = threading.Condition()
        self.lock = threading.Lock()
        self.next_id = 0
        start_reader(self.proc, self._handle)
        self.request("initialize", {"processId": os.getpid(), "rootUri": "file://" + root, "capabilities": {
            "workspace": {"workspaceEdit": {"documentChanges": True}, "applyEdit": True}},
            "initializationOptions": {"hpLsp": {"searchOnSave": False, "maxFileSizeKb": 8192}}})
        self.notify("initialized", {})

    def _send(self, msg: dict[str, object]) -> None:
        write_message(self.proc, msg, self.lock)

    def _handle(self, msg: dict[str, Any]) -> None:
        with self.cond:
            if msg.get("method") == "textDocument/publishDiagnostics":
                self.diags[msg["params"]["uri"]] = msg["params"]["diagnostics"]
            elif "id" in msg and "method" in msg:  # a request from the server: answer it
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": reply_to_server(msg)})
            elif "id" in msg:
                self.answers[msg["id"]] = msg.get("result", msg.get("error"))
            self.cond.notify_all()

    def notify(self, method: str, params: object) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: object, timeout: float = 120.0) -> object:
        with self.cond:
            self.next_id += 1
            rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.answers, timeout=timeout):
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            return self.answers.pop(rid)

    def wait_diags(self, uri: str, code: str, timeout: float = 120.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: any(d.get("code") == code for d in self.diags.get(uri, [])),
                                      timeout=timeout)

    def open(self, path: str, text: str) -> str:
        uri = "file://" + path
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})
        return uri

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def _linked_search(folder: str, name: str, train_yaml: str) -> tuple[str, str]:
    sub = os.path.join(folder, name)
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(LLAMA, "search.yaml")) as f:
        text = f.read().replace("train_yaml: ./train.yaml", f"train_yaml: {train_yaml}")
    path = os.path.join(sub, "search.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path, text


def _device(path: str, minor: int, fallback: str) -> None:
    import stat as st

    try:
        os.mknod(path, st.S_IFCHR | 0o666, os.makedev(1, minor))
    except OSError:
        os.symlink(fallback, path)


def _item1_and_2(folder: str) -> bool:
    ok = True
    lsp = Lsp(folder)
    try:
        print("\nD-002 case 1: linked train_yaml that blocks a read (server didOpen, hp-plan check)")
        print(f"{'train_yaml':<18}{'HP009 s':>9}{'symbol s':>10}{'check s':>9}{'RSS MB':>8}")
        for kind in ("fifo", "/dev/stdin", "/proc/self/fd/0"):
            name = "i1-" + kind.strip("/").replace("/", "-")
            os.makedirs(os.path.join(folder, name))
            ref = kind
            if kind == "fifo":
                os.mkfifo(os.path.join(folder, name, "train.yaml"))
                ref = "./train.yaml"
            path, text = _linked_search(folder, name, ref)
            t0 = time.perf_counter()
            uri = lsp.open(path, text)
            got = lsp.wait_diags(uri, "HP009", timeout=30)
            t_diag = time.perf_counter() - t0
            lsp.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=30)
            t_sym = time.perf_counter() - t0
            c0 = time.perf_counter()
            with subprocess.Popen([sys.executable, "-m", "engine.cli", "check", path], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT) as proc:
                try:
                    proc.wait(timeout=30)
                    t_check = time.perf_counter() - c0
                except subprocess.TimeoutExpired:
                    proc.kill()
                    t_check = float("inf")
            met = got and t_sym < 5 and t_check < 5
            ok &= met
            print(f"{kind:<18}{t_diag:>9.2f}{t_sym:>10.2f}{t_check:>9.2f}{lsp.rss_mb():>8.0f}  {'ok' if met else 'MISS'}")
        print("\nD-002 case 2: endless or huge train_yaml: codeAction + Apply (server)")
        print(f"{'train_yaml':<18}{'action s':>9}{'apply s':>9}{'RSS before':>11}{'after MB':>9}  reason")
        for kind in ("zero", "urandom", "sparse-2GB"):
            name = "i2-" + kind
            sub = os.path.join(folder, name)
            os.makedirs(sub)
            if kind == "sparse-2GB":
                with open(os.path.join(sub, "train.yaml"), "wb") as f:
                    f.truncate(2 * 1024**3)
                ref = "./train.yaml"
            else:
                _device(os.path.join(sub, kind), 5 if kind == "zero" else 9, f"/dev/{kind}")
                ref = f"./{kind}"
            path, text = _linked_search(folder, name, ref)
            uri = lsp.open(path, text)
            lsp.wait_diags(uri, "HP009", timeout=30)
            before = lsp.rss_mb()
            t0 = time.perf_counter()
            lsp.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": [], "only": ["source.applyOptimalStrategy"]}}, timeout=60)
            t_act = time.perf_counter() - t0
            t1 = time.perf_counter()
            res = lsp.request("workspace/executeCommand", {"command": "hpLsp.applyOptimalStrategy",
                                                           "arguments": [uri]}, timeout=60)
            t_apply = time.perf_counter() - t1
            after = lsp.rss_mb()
            reason = str(res.get("reason", "")) if isinstance(res, dict) else str(res)
            met = t_act < 5 and t_apply < 5 and after - before < 50
            ok &= met
            print(f"{kind:<18}{t_act:>9.2f}{t_apply:>9.2f}{before:>11.0f}{after:>9.0f}  {'ok  ' if met else 'MISS'}"
                  f"{reason[-60:]}")
    finally:
        lsp.close()
    return ok


def _item6() -> bool:
    from engine.edit import strategy_edits
    from engine.specs import Strategy

    with open(os.path.join(LLAMA, "train.yaml")) as f:
        base = f.read()
    end = base.index("\n", base.index("tp_size"))
    strategy = Strategy(dp=2, dp_shard=2, tp=4, pp=2, micro_batch_size=1, micro_batch_num=8)
    print("\nD-002 case 6: strategy rewrite, comment of N ': ' on the tp_size line (before: 750 -> 0.11 s, "
          "3,000 -> 1.7 s, 6,000 -> 6.7 s)")
    print(f"{'N':>8}{'wall s':>9}{'cpu s':>8}{'heap MB':>9}")
    ok = True
    for n in (750, 3000, 6000, 12000, 24000):
        text = base[:end] + "  # " + "x: " * n + base[end:]
        w0, c0 = time.perf_counter(), time.process_time()
        res = strategy_edits(text, strategy)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        tracemalloc.start()
        strategy_edits(text, strategy)
        heap = tracemalloc.get_traced_memory()[1] / MB
        tracemalloc.stop()
        if n == 6000:
            ok &= res.ok and cpu < 0.5
        print(f"{n:>8}{wall:>9.3f}{cpu:>8.3f}{heap:>9.1f}  {'ok' if res.ok else res.error}")
    return ok


def _item7(folder: str, edits: int = 10_000) -> bool:
    path = os.path.join(folder, "i7", "train.yaml")
    os.makedirs(os.path.dirname(path))
    with open(os.path.join(LLAMA, "train.yaml")) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text)
    lsp = Lsp(folder)
    print(f"\nD-002 case 7: server RSS over {edits:,} incremental edits (before: 61.8 -> 84 MB, ~2.2 KB/edit)")
    try:
        uri = lsp.open(path, text)
        line = text.split("\n").index("  tp_size: 8")
        lsp.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        samples = []
        for i in range(edits + 1):
            if i % 2000 == 0:
                lsp.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})  # all processed
                samples.append((i, lsp.rss_mb()))
            if i == edits:
                break
            digit = "8" if i % 2 else "4"
            lsp.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": i + 2}, "contentChanges": [
                {"range": {"start": {"line": line, "character": 11}, "end": {"line": line, "character": 12}},
                 "text": digit}]})
    finally:
        lsp.close()
    for i, rss in samples:
        print(f"  after {i:>6,} edits: RSS {rss:6.1f} MB")
    per_edit_kb = (samples[-1][1] - samples[1][1]) * 1024 / max(samples[-1][0] - samples[1][0], 1)
    print(f"  growth from 2,000 to {edits:,} edits: {per_edit_kb:.3f} KB/edit (target < 0.2)")
    return per_edit_kb < 0.2


def server_and_rewrite() -> bool:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hp-hostile-") as folder:
        ok = _item1_and_2(folder)
        ok &= _item6()
        ok &= _item7(folder)
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--server", action="store_true", help="only the server and rewrite cases (D-002)")
    ap.add_argument("--numbers", action="store_true", help="only the hostile numbers (benchmarks/hostile_numbers.py)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.numbers:
        return _numbers()
    if args.child:
        print(json.dumps(run_case(args.case)))
        return 0
    if args.server:
        return 0 if server_and_rewrite() else 1
    names = [args.case] if args.case else list(CASES)
    print(f"{'case':<18}{'size MB':>9}{'wall s':>9}{'cpu s':>8}{'RSS MB':>9}{'heap MB':>9}  target    codes")
    ok = True
    for name in names:
        proc = subprocess.run([sys.executable, __file__, "--child", "--case", name], capture_output=True,
                              text=True, cwd=ROOT, timeout=600)
        if proc.returncode != 0:
            print(f"{name:<18} FAILED: {proc.stderr.strip()[-300:]}")
            ok = False
            continue
        r = json.loads(proc.stdout)
        _, t_target, m_target = CASES[name]
        met = r["wall_s"] < t_target and (m_target is None or r["rss_mb"] < m_target)
        ok &= met
        target = f"<{t_target:g}s" + (f",<{m_target:g}MB" if m_target else "")
        print(f"{name:<18}{r['size_mb']:>9.2f}{r['wall_s']:>9.2f}{r['cpu_s']:>8.2f}{r['rss_mb']:>9.0f}"
              f"{r['heap_peak_mb']:>9.1f}  {target:<9} {'ok ' if met else 'MISS'} {','.join(r['codes'])}")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if not args.case or args.server:
        ok &= server_and_rewrite()
    if not args.case:
        ok &= _numbers() == 0
    return 0 if ok else 1


def _numbers() -> int:
    """benchmarks/hostile_numbers.py in its own process (its cases measure their own children)."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "hostile_numbers.py")], cwd=ROOT,
                          timeout=1800).returncode


if __name__ == "__main__":
    sys.exit(main())
