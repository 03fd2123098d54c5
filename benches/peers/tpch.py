#!/usr/bin/env python3
"""Peers for `tsjoin-bench tpch`: DuckDB and ClickHouse (chdb) on the same
Parquet files as the Rust engines (`<table>/<table>-NNN.parquet`, several
files for the large tables), each table a view over its files. The 22
TPC-H queries come from the Rust runner (`--queries`, a JSON list of
{name, duckdb, clickhouse}) in each engine's dialect, with the same
parameters. No primary keys are declared: views cannot carry them.

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"}. Answers: rows of "|"-joined cells, NULL as "NULL", numbers with
6 decimals (decimals included).
"""
from common import view_peers

if __name__ == "__main__":
    view_peers(("region", "nation", "supplier", "customer", "part", "partsupp", "orders",
                "lineitem"))
