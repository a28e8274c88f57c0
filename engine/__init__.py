"""The hp-lsp engine: read, validate, price and search HyperParallel parallel strategies.

The engine knows nothing of the Language Server Protocol. The CLI (`hp-plan`) and the language server
(`hp_lsp`) are two front ends over the same calls, so a number shown in the editor is the number the
command line prints.
"""

__version__ = "0.1.0"
