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
import argparse
import datetime
import decimal
import json

from common import chdb_session, duckdb_connection, emit, fetch_arrow, timed


def cell(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (float, decimal.Decimal)):
        return f"{float(v):.6f}"
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return f"{v.total_seconds():.6f}"
    return str(v)


def norm(table):
    cols = [c.to_pylist() for c in table.columns]
    return ["|".join(cell(c[i]) for c in cols) for i in range(table.num_rows)]



def run_duckdb(args, queries):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    for t in ("readings", "diagnostics"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{args.data}/{t}/*.parquet')")
    for q in queries:
        try:
            times, ans = timed(args.runs, lambda: fetch_arrow(con, q["duckdb"]))
            emit(engine=f"DuckDB {duckdb.__version__}", query=q["name"], times=times,
                 answer=norm(ans))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"DuckDB {q['name']} failed: {e}")


def run_chdb(args, queries):
    got = chdb_session(args.threads)
    if got is None:
        return
    chdb, sess = got
    sess.query("SET session_timezone = 'UTC'")
    for t in ("readings", "diagnostics"):
        sess.query(f"CREATE VIEW {t} AS SELECT * FROM file('{args.data}/{t}/*.parquet', Parquet)")
    for q in queries:
        try:
            times, ans = timed(args.runs, lambda: sess.query(q["clickhouse"], "ArrowTable"))
            emit(engine=f"ClickHouse (chdb {chdb.__version__})", query=q["name"],
                 times=times, answer=norm(ans))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"chdb {q['name']} failed: {str(e)[:300]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", required=True, help="JSON file: [{name, duckdb, clickhouse}]")
    ap.add_argument("--engines", default="duckdb,chdb")
    args = ap.parse_args()
    with open(args.queries) as f:
        queries = json.load(f)
    engines = args.engines.split(",")
    if "duckdb" in engines:
        run_duckdb(args, queries)
    if "chdb" in engines:
        run_chdb(args, queries)


if __name__ == "__main__":
    main()
