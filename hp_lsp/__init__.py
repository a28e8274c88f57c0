"""hp-lsp: a language server for HyperParallel `train.yaml` and search configs.

The protocol layer (server.py, features/) is thin; the state lives in session.py and the CPU-heavy search
runs in a worker process (worker.py) so hovers and typing never wait for it.
"""

__version__ = "0.1.0"
