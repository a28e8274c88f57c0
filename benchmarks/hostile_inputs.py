"""Hostile inputs: wall time, CPU time and peak memory of `check_file` on each (issue 2 targets).

Cases:
  * alias bomb ("billion laughs", 9 levels x 9 aliases) ...................... < 2 s, < 200 MB
  * 5 MB train.yaml, node-dense (100k flow mappings of 2 keys) .................. < 5 s
  * 5 MB train.yaml, long lines (20k list items of ~250 characters) .............. < 5 s
  * 5000 levels of flow nesting and 5000 levels of block nesting ................ bounded (refused)
  * 11 MB file (above the 10 MiB default cap) .................................... refused without parsing

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
import time
import tracemalloc

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.case)))
        return 0
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
