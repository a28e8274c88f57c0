#!/bin/sh
# The whole test suite: lint, type check, unit + end-to-end tests (pytest-lsp, headless Neovim) and the
# VS Code extension's build, type check, tests and packaging, and the real-editor tests (VS Code in code-server,
# Emacs + eglot, Vim + ALE: tests/vscode, tests/emacs, tests/vim). Run from the repository root after the
# Quick start's first command. Under CI=true nothing that CI is meant to exercise may be skipped.
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "run the Quick start's first command first (no .venv)"; exit 2; }

echo "== ruff"; "$PY" -m ruff check engine hp_lsp tests benchmarks scripts
echo "== mypy"; "$PY" -m mypy; "$PY" -m mypy scripts

if [ -f editors/vscode/package.json ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "== vscode extension"
    (cd editors/vscode && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run --silent check)
  elif [ "${CI:-}" = "true" ]; then
    echo "npm is required in CI"; exit 1
  else
    echo "== vscode extension: skipped (npm not found)"
  fi
fi

echo "== pytest"
set +e
"$PY" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi
exit "$rc"
