#!/usr/bin/env python3
"""Peers for `tsjoin-bench ssb`: DuckDB and ClickHouse (chdb) on the same
Parquet files as the Rust engines (`lineorder/*.parquet`, one file per
~1 M rows, and one file per dimension), each table a view over its files,
named as in the queries (`date` unquoted: both parsers accept it). The 13
SSB queries (and Q4.1's FROM-order permutations) come from the Rust runner
(`--queries`, a JSON list of {name, duckdb, clickhouse}; the SQL is the
same for both). No primary keys are declared: views cannot carry them.

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"}. Answers: rows of "|"-joined cells, NULL as "NULL", numbers with
6 decimals (DuckDB's HUGEINT sums arrive as decimals).
"""
from common import view_peers

if __name__ == "__main__":
    view_peers(("lineorder", "customer", "supplier", "part", "date"))
