"""Helpers for the language server's service tests: a DocState filled the way the server fills it, from the
real engine, and the no-op progress/cancel callbacks a job run in-process takes."""

from __future__ import annotations

from pathlib import Path

from hp_lsp.analysis import analyse, cluster_from_search_config
from hp_lsp.search_job import SearchRequest, run_search
from hp_lsp.session import Session

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LLAMA = EXAMPLES / "llama3-70b"


def no_progress(_: float) -> None:
    pass


def never() -> bool:
    return False


def state_for(path: Path, text: str | None = None, *, search: bool = True, space: Path | None = None,
              version: int = 1):
    """A session document with its fast check and (optionally) its search recorded, as the server does."""
    text = path.read_text() if text is None else text
    session = Session()
    uri = path.as_uri()
    st = session.open(uri, str(path), version)
    overrides = cluster_from_search_config(str(space)) if space else None
    session.record_analysis(uri, st.generation, analyse(str(path), text, version, overrides=overrides,
                                                        max_file_size_kb=1024))
    if search:
        gen = session.begin_search(uri)
        assert gen is not None
        out = run_search(SearchRequest(str(path), text, overrides, version=version,
                                       space_path=str(space) if space else None),
                         progress=no_progress, cancelled=never)
        session.record_search(uri, gen, version, out)
    return session, st
