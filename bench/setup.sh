#!/usr/bin/env bash
# Install the official MCP peers the benchmarks compare trio-mcp against, all under .bench/
# (gitignored), reusing the interop tests' installs when they are there:
#   - the TypeScript SDK 1.32.x: tests/interop/node/node_modules if present, else npm ci of
#     the interop lockfile into .bench/node (needs Node.js >= 20 and npm);
#   - Python mcp==1.30.0 (tasks): .interop/mcp130 if present, else a venv .bench/mcp130;
#   - Python mcp 2.x (the current release; plain calls only): a venv .bench/mcp2.
# Usage: bash bench/setup.sh        (from the repository root; safe to run again)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .bench

if [ -d tests/interop/node/node_modules/@modelcontextprotocol/sdk ]; then
  echo "== TS SDK: reusing tests/interop/node/node_modules"
elif command -v npm >/dev/null 2>&1; then
  echo "== TS SDK: npm ci into .bench/node (node $(node --version))"
  mkdir -p .bench/node
  cp tests/interop/node/package.json tests/interop/node/package-lock.json .bench/node/
  (cd .bench/node && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "== TS SDK: skipped (install Node.js >= 20 and npm, then run this again)"
fi

if [ -x .interop/mcp130/bin/python ] && .interop/mcp130/bin/python -c "import mcp" 2>/dev/null; then
  echo "== mcp 1.30.0: reusing .interop/mcp130"
else
  echo "== mcp 1.30.0: venv .bench/mcp130"
  $PY -m venv .bench/mcp130
  .bench/mcp130/bin/python -m pip install -q --upgrade pip
  if [ -f tests/interop/py/requirements-mcp130.txt ]; then
    .bench/mcp130/bin/python -m pip install -q -r tests/interop/py/requirements-mcp130.txt
  else
    .bench/mcp130/bin/python -m pip install -q "mcp==1.30.0"
  fi
fi

echo "== mcp 2.x: venv .bench/mcp2"
[ -x .bench/mcp2/bin/python ] || $PY -m venv .bench/mcp2
.bench/mcp2/bin/python -m pip install -q --upgrade pip
.bench/mcp2/bin/python -m pip install -q --upgrade "mcp>=2,<3"
.bench/mcp2/bin/python -c "import importlib.metadata as m; print('   mcp', m.version('mcp'))"

echo "== done: python -m bench (or python -m bench --quick for a smoke run)"
