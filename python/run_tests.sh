#!/usr/bin/env bash
# Builds the tsjoin Python package into a fresh virtual environment with
# `pip install` (maturin as the PEP 517 backend, nothing installed by hand)
# and runs its pytest suite. Part of README's test command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${TSJOIN_VENV:-$root/target/python-venv}"
python="${PYTHON:-python3}"

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# The dev profile and the shared target/ directory: the build reuses what
# `cargo test --workspace` compiled (one feature set across the workspace,
# see workspace-hack/).
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip install --quiet "$root/python[test]"
# The CLI the cross-check test compares with (its dependencies are the ones
# built above: every member asks for the same features, see workspace-hack/).
cargo build -p tsjoin-cli --locked --quiet
cd "$root/python"
TSJOIN_CLI="$root/target/debug/tsjoin-cli" "$venv/bin/python" -m pytest -q tests
