"""`hp-lsp` / `python -m hp_lsp`: run the language server.

Transports: stdio (the default, also asked for explicitly with `--stdio`, which `vscode-languageclient` and
other clients append to the command line), `--tcp` or `--ws` with `--host`/`--port`. pygls' own
`start_server` parser does not know `--stdio` and exits 2 on it, so the arguments are parsed here.

`--tcp` serves one client: a second connection is refused with a JSON-RPC error and closed (hp_lsp/server.py).

Logging goes to stderr at WARNING: pygls logs every message at INFO/DEBUG, and under stdio nothing but the
protocol may reach stdout.
"""

from __future__ import annotations

import argparse
import logging
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line; exits 2 with usage on anything unknown (a clear error beats a silent transport)."""
    parser = argparse.ArgumentParser(
        prog="hp-lsp", description="HyperParallel train.yaml / search-config language server (LSP).")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true",
                           help="speak LSP over stdin/stdout (the default; accepted for clients that ask for it)")
    transport.add_argument("--tcp", action="store_true",
                           help="listen on TCP --host:--port and serve the first client only: a second "
                                "connection gets a JSON-RPC error and is closed; the server exits with its "
                                "client (docs/settings.md, \"The connection\")")
    transport.add_argument("--ws", action="store_true", help="listen on a WebSocket at --host:--port")
    parser.add_argument("--host", default="127.0.0.1", help="address for --tcp/--ws (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8888, help="port for --tcp/--ws (default 8888)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="hp-lsp %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)
    from hp_lsp.server import create_server

    server = create_server()
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        elif args.ws:
            server.start_ws(args.host, args.port)
        else:
            server.start_io()
    finally:
        server.stop_worker()


if __name__ == "__main__":
    main()
