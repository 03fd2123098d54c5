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
# `cargo test --workspace` compiled (one feature set across the workspace).
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip install --quiet "$root/python[test]"
# The CLI the cross-check test compares with: the binary `cargo test
# --workspace` built for the CLI's own tests. (Not `cargo build -p
# tsjoin-cli`: without the workspace's dev-dependencies, feature unification
# differs and DataFusion would be compiled a second time.)
cargo test --workspace --locked --no-run --quiet
cd "$root/python"
TSJOIN_CLI="$root/target/debug/tsjoin-cli" "$venv/bin/python" -m pytest -q tests
