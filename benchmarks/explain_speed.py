"""How long `hp-plan explain` / the server's "Show plan" take per plan: pricing + schedule simulation, the
SVG and the text picture, on the examples (the DeepSeek-V3 best plan is the largest: 64 micro-batches × 7
chunks × 8 stages, about 18k intervals).

    .venv/bin/python benchmarks/explain_speed.py [--repeat 3]

Target: under 2 s for the largest example on a 2-core machine (the server computes it in a thread, off the
event loop, only when the user asks for the plan view; the hover uses engine.explain.bound_of, one row).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.check import check_file  # noqa: E402
from engine.explain import bound_of, explain_estimate, pick_plan  # noqa: E402
from engine.explain.svg import render as render_svg  # noqa: E402
from engine.explain.terminal import render as render_text  # noqa: E402

T = TypeVar("T")
FILES = ("examples/explain/1f1b.yaml", "examples/explain/interleaved.yaml", "examples/llama3-70b/search.yaml",
         "examples/deepseek-v3/search.yaml")


def best_of(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    times = []
    for _ in range(max(repeat, 1)):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'file':<38} {'intervals':>9} {'explain':>9} {'svg':>9} {'text':>9} {'bound':>8} {'svg MB':>7}")
    for f in FILES:
        config = check_file(str(ROOT / f)).config
        assert config is not None
        est, diags = pick_plan(config)
        if est is None:  # e.g. no plan the file's framework can run: say so instead of a figure
            print(f"{f:<38} no plan: {diags[0].code if diags else 'nothing priced'}")
            continue
        t_ex, ex = best_of(partial(explain_estimate, config, est), args.repeat)
        t_svg, svg = best_of(partial(render_svg, ex), args.repeat)
        t_txt, _ = best_of(partial(render_text, ex), args.repeat)
        t_b, _ = best_of(partial(bound_of, config, est), args.repeat)
        print(f"{f:<38} {len(ex.timeline):>9,} {1000 * t_ex:>7.1f}ms {1000 * t_svg:>7.1f}ms "
              f"{1000 * t_txt:>7.1f}ms {1000 * t_b:>6.2f}ms {len(svg) / 1e6:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
