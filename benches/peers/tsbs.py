#!/usr/bin/env python3
"""Peers for `tsjoin-bench tsbs`: DuckDB and ClickHouse (chdb) on the same
Parquet files (`readings/*.parquet`, `diagnostics/*.parquet`, one file per
day), each table a view over its files. The queries come from the Rust
runner already in each engine's dialect (`--queries`, a JSON list of
{name, duckdb, clickhouse}), so every engine answers the same parameters.

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"}. Answers: rows of "|"-joined cells, NULL as "NULL", floats with 6
decimals, timestamps in ISO form (the runner canonicalises further).
"""
from common import view_peers

if __name__ == "__main__":
    view_peers(("readings", "diagnostics"))
