"""What one request costs in the language server beside its own file: the workspace scan a check makes to find
the search config of a train.yaml, and the buffers a search job carries to the worker.

  * scan: a workspace root holding a data folder of N files (default 200,000) and the train.yaml's own folder;
    the time of `SearchConfigIndex.referencing` on the first check and on each later one (the folders did not
    change);
  * job: 150 open 500 KB documents beside llama3-70b's train.yaml and search.yaml; the size of the search
    job's pickled request (what goes down the pipe to the worker) and the time to build and pickle it.

Usage: .venv/bin/python benchmarks/request_scope.py [--files N] [--open N] [--kb K]
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hp_lsp.workspace import SearchConfigIndex  # noqa: E402


def scan(files: int, repeat: int = 5) -> tuple[float, float]:
    """(first check, median of the later checks) in seconds."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        data = root / "data"
        data.mkdir()
        for i in range(files):
            (data / f"shard{i:06}.bin").touch()
        project = root / "project"
        project.mkdir()
        (project / "train.yaml").write_text("model: {}\n")
        index = SearchConfigIndex()
        t0 = time.perf_counter()
        index.referencing(str(project / "train.yaml"), [str(root)], {})
        first = time.perf_counter() - t0
        later = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            index.referencing(str(project / "train.yaml"), [str(root)], {})
            later.append(time.perf_counter() - t0)
        return first, statistics.median(later)


async def job(open_docs: int, kb: int) -> tuple[int, float]:
    """(pickled bytes, seconds to build and pickle) of the train.yaml's search job."""
    from hp_lsp.client import ClientFeatures
    from hp_lsp.documents import LspTextDocument
    from hp_lsp.scheduler import Scheduler
    from hp_lsp.session import Session

    @dataclass
    class Workspace:
        docs: dict[str, LspTextDocument] = field(default_factory=dict)
        folders: dict[str, Any] = field(default_factory=dict)
        root_path: str | None = None

        def get_text_document(self, uri: str) -> LspTextDocument:
            return self.docs[uri]

    @dataclass
    class Sink:  # the client, the worker and the progress: only the submitted jobs are kept
        jobs: list[Any] = field(default_factory=list)
        features: ClientFeatures = field(default_factory=ClientFeatures)

        def publish_diagnostics(self, *a: Any) -> None: ...
        def refresh_code_lenses(self) -> None: ...
        def submit(self, j: Any) -> None:
            self.jobs.append(j)
        def cancel(self, key: str) -> None: ...
        def started(self, *a: Any) -> None: ...
        def report(self, *a: Any) -> None: ...
        def finished(self, *a: Any) -> None: ...

    ws, sink = Workspace(), Sink()
    loop = asyncio.get_running_loop()
    sched = Scheduler(session=Session(), workspace=lambda: ws, client=sink, jobs=sink, progress=sink,
                      call_soon=loop.call_soon_threadsafe, log=lambda *a: None)
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "llama"
        shutil.copytree(ROOT / "examples" / "llama3-70b", folder)
        filler = "# " + "x" * 97 + "\n"
        for i in range(open_docs):
            p = Path(d) / f"open{i}.yaml"
            uri = p.as_uri()
            ws.docs[uri] = LspTextDocument(uri, source=filler * (kb * 1024 // 100), version=1)
            sched.session.open(uri, str(p), 1)
        for name in ("search.yaml", "train.yaml"):
            p = folder / name
            ws.docs[p.as_uri()] = LspTextDocument(p.as_uri(), source=p.read_text(), version=1)
        sched.session.open((folder / "search.yaml").as_uri(), str(folder / "search.yaml"), 1)
        uri = (folder / "train.yaml").as_uri()
        sched.opened(uri)
        while not sink.jobs:
            await asyncio.sleep(0.01)
        sched.shutdown()
        t0 = time.perf_counter()
        sched.search(uri)  # a save's search: the request built on the loop, then pickled for the worker
        size = len(pickle.dumps(sink.jobs[-1], protocol=pickle.HIGHEST_PROTOCOL))
        return size, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--open", type=int, default=150)
    ap.add_argument("--kb", type=int, default=500)
    args = ap.parse_args()
    first, later = scan(args.files)
    print(f"workspace scan, {args.files:,}-file data folder: first check {first * 1e3:.1f} ms, "
          f"each later check {later * 1e3:.2f} ms")
    size, secs = asyncio.run(job(args.open, args.kb))
    print(f"search job with {args.open} open {args.kb} KB documents: {size / 1e6:.2f} MB pickled, "
          f"built and pickled in {secs * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
