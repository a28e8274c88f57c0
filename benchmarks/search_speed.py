"""Search speed: median wall time of full searches, candidates per second and peak RSS.

Cases, each from its bundled example (model, cluster, global batch, memory budget) with every dimension
searched, and their targets on a 2-core machine:
  * Llama-3.1-70B on 1024 H100, every dimension auto, recompute auto ............ <= 20 ms (D-009)
  * DeepSeek-V3 on 2048 H800, every dimension auto, recompute auto ............. <= 500 ms
  * Llama-3.1-70B on 1024 H100, every dimension auto, recompute per_layer ....... <= 2 s
  * DeepSeek-V3 on 110,592 H800 in 72-device nodes, G 221,184, all auto ........ <= 1 s (D-009)
  * peak RSS of each case's process ............................................. < 300 MB
D-009 also asks for the same best plans before and after a change: --top-out writes every case's top 10
to the last digit, --check-top compares this run's with such a file (exit 1 on any difference).

Each case runs in its own process (so its peak RSS is its own), warms up once, then times REPEAT runs.
Wall time is the target; CPU time (process_time) is printed beside it because the machine is shared and
wall time stretches under load ("ok (cpu)": the CPU time meets the target, the wall time did not). "cand/s"
is valid candidates searched per wall second (every one is priced or proved slower than the K-th best by a
bound, see engine.search.rank). Peak RSS is the process's high-water mark over the warm-up and the repeats
(numpy's own import is about 30 MB of it). "faults" is the minor page faults per timed search: the case's process keeps
the C heap's freed blocks as the language server's search worker does (engine.heap.keep_freed_heap), so a figure
far above zero says the blocks are being mapped afresh again (a few ms of kernel time a search).
Run: `.venv/bin/python benchmarks/search_speed.py [--repeat N] [--case NAME] [--top-out F] [--check-top F]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CASES = {
    "llama70b-auto": ("Llama-3.1-70B, 1024 H100, all auto, recompute auto", 0.020),
    "deepseekv3-auto": ("DeepSeek-V3, 2048 H800, all auto, recompute auto", 0.500),
    "llama70b-per_layer": ("Llama-3.1-70B, 1024 H100, all auto, recompute per_layer", 2.0),
    "deepseekv3-nvl72": ("DeepSeek-V3, 110,592 H800 (72 per node), G 221,184, all auto", 1.0),
}
# Clusters that differ from the bundled example: (nodes, cards per node, global batch per device).
# NVL72-class racks hold 72 devices in one NVLink domain; 1536 of them make 110,592 devices, and two
# sequences per device make a global batch of 221,184: both divisor-rich (2^12 · 3^3, 2^13 · 3^3), the
# largest space of the cases, 2.9 M candidates (D-009).
CLUSTERS = {"deepseekv3-nvl72": (1536, 72, 2)}


def build(case: str):  # type: ignore[no-untyped-def]
    """The case's Config: the bundled example's model, cluster, batch and budget, every dimension searched
    (the `parallelism` declarations dropped, so each dimension is absent = searched within its bounds)."""
    from engine.check import check_file

    name = "llama3-70b" if case.startswith("llama70b") else "deepseek-v3"
    loaded = check_file(os.path.join(ROOT, "examples", name, "search.yaml"))
    cfg = loaded.config
    assert cfg is not None and cfg.model is not None and cfg.cluster is not None, loaded.diagnostics
    recompute = "per_layer" if case.endswith("per_layer") else "auto"
    cluster, batch = cfg.cluster, cfg.global_batch_size
    if case in CLUSTERS:
        nodes, cards, per_device = CLUSTERS[case]
        cluster = replace(cluster, num_nodes=nodes, cards_per_node=cards)
        batch = per_device * cluster.world_size
    return replace(cfg, dimensions={}, recompute=recompute, stated=None, cluster=cluster, global_batch_size=batch)


def run_case(case: str, repeat: int) -> dict[str, object]:
    from engine.heap import keep_freed_heap
    from engine.search import search

    keep_freed_heap()  # the process is set up as the language server's search worker is (hp_lsp.worker)
    cfg = build(case)
    first = search(cfg)  # warm-up: imports, numpy caches
    times, cpu = [], []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = search(cfg)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / max(repeat, 1)
    med = statistics.median(times)
    best = res.best
    return {
        "case": case, "median_s": med, "min_s": min(times), "median_cpu_s": statistics.median(cpu), "evaluated": res.evaluated, "feasible": res.feasible,
        "candidates_per_s": res.evaluated / med if med > 0 else 0.0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "faults": faults,
        "best": best.strategy.short() if best else None,
        "best_step_s": best.step_time_s if best else None,
        "best_peak_gib": best.peak_memory_gib if best else None,
        "same_as_warmup": (first.best.strategy == best.strategy) if (first.best and best) else first.best is best,
        "diagnostics": [d.code for d in res.diagnostics],
        # The whole top 10 to the last digit: compare runs before and after a change with --top-out.
        "top": [[e.strategy.short(), repr(e.step_time_s), repr(e.peak_memory_gib)] for e in res.top],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--top-out", metavar="FILE", help="write every case's top 10 (strategy, step s, peak GiB, "
                    "to the last digit) to FILE as JSON, to diff the plans of two versions")
    ap.add_argument("--check-top", metavar="FILE", help="compare every case's top 10 with FILE (a --top-out of "
                    "another version); exit 1 on any difference")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.case, args.repeat)))
        return 0
    cases = [args.case] if args.case else list(CASES)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times stretch under load; CPU "
          "time does not)")
    print(f"{'case':<58} {'median':>9} {'cpu':>8} {'target':>7} {'evaluated':>10} {'cand/s':>10} {'RSS MB':>7} "
          f"{'faults':>7}  best")
    worst = 0
    tops: dict[str, object] = {}
    for case in cases:
        proc = subprocess.run([sys.executable, __file__, "--child", "--case", case, "--repeat", str(args.repeat)],
                              capture_output=True, text=True, cwd=ROOT, check=False)
        if proc.returncode != 0:
            print(f"{case}: failed\n{proc.stderr}")
            worst = 1
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        tops[case] = r["top"]
        title, target = CASES[case]
        fast = "ok" if r["median_s"] <= target else "ok (cpu)" if r["median_cpu_s"] <= target else "SLOW"
        flag = fast if r["peak_rss_mb"] < 300 else "RSS"
        worst |= flag in ("SLOW", "RSS")
        print(f"{title:<58} {r['median_s'] * 1000:>7.1f}ms {r['median_cpu_s'] * 1000:>6.1f}ms {target * 1000:>5.0f}ms "
              f"{r['evaluated']:>10,} "
              f"{r['candidates_per_s']:>10,.0f} {r['peak_rss_mb']:>7.0f} {r['faults']:>7,.0f}  {r['best']} "
              f"({r['best_step_s']:.3f} s, {r['best_peak_gib']:.1f} GiB) {flag}"
              if r["best"] else f"{title:<58} {r['median_s'] * 1000:>7.1f}ms  no strategy: {r['diagnostics']}")
    if args.top_out:
        with open(args.top_out, "w", encoding="utf-8") as fh:
            json.dump(tops, fh, indent=1)
    if args.check_top:
        with open(args.check_top, encoding="utf-8") as fh:
            before = json.load(fh)
        for case in tops:
            same = before.get(case) == tops[case]
            print(f"{case}: top 10 {'identical to' if same else 'DIFFERS from'} {args.check_top}")
            worst |= not same
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
