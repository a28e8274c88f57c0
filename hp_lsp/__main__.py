"""`hp-lsp` / `python -m hp_lsp`: run the language server (stdio by default; --tcp/--ws from pygls).

Logging goes to stderr at WARNING: pygls logs every message at INFO/DEBUG, and under stdio nothing but the
protocol may reach stdout.
"""

from __future__ import annotations

import logging
import sys


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="hp-lsp %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)
    from pygls.cli import start_server

    from hp_lsp.server import create_server

    server = create_server()
    try:
        start_server(server, argv if argv is not None else sys.argv[1:])
    finally:
        server.stop_worker()


if __name__ == "__main__":
    main()
