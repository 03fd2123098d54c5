#!/usr/bin/env python3
"""Peers for `tsjoin-bench asof`: DuckDB, ClickHouse (chdb) and Polars run
their native ASOF JOIN on the same Parquet files: for every trade the
prevailing quote (bid, ask) of its symbol (`p.ts <= t.ts`, left rows kept).

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"}. The answer is one row "n|matched|sum_bid|sum_ask" (trades, trades
with a quote, sums of the matched bid and ask); the Rust runner compares the
sums with a relative tolerance (summation order differs between engines).
"""
import argparse
import json
import os
import sys

from common import duckdb_connection, emit, optional_import, timed


def answer(row):
    n, matched, sb, sa = row
    return ["|".join(str(v) for v in (int(n), int(matched), float(sb or 0.0), float(sa or 0.0)))]



def run_duckdb(args):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    sql = f"""
      SELECT count(*), count(p.bid), sum(p.bid), sum(p.ask)
      FROM read_parquet('{args.data}/trades/*.parquet') t
      ASOF LEFT JOIN read_parquet('{args.data}/prices/*.parquet') p
        ON t.sym = p.sym AND t.ts >= p.ts"""
    try:
        times, ans = timed(args.runs, lambda: con.execute(sql).fetchall())
        emit(engine=f"DuckDB {duckdb.__version__} ASOF LEFT JOIN", query="asof",
             times=times, answer=answer(ans[0]))
    except Exception as e:  # noqa: BLE001 - report, keep going
        emit(note=f"DuckDB failed: {e}")


def run_chdb(args):
    chdb = optional_import("chdb")
    if chdb is None:
        return
    sql = f"""
      SELECT count(), count(p.bid), sum(p.bid), sum(p.ask)
      FROM file('{args.data}/trades/*.parquet', Parquet) t
      ASOF LEFT JOIN file('{args.data}/prices/*.parquet', Parquet) p
        ON t.sym = p.sym AND t.ts >= p.ts
      SETTINGS join_use_nulls = 1, max_threads = {args.threads}"""
    try:
        def q():
            res = chdb.query(sql, "JSONCompact")
            return json.loads(res.bytes())["data"][0]
        times, ans = timed(args.runs, q)
        emit(engine=f"ClickHouse (chdb {chdb.__version__}) ASOF LEFT JOIN", query="asof",
             times=times, answer=answer(ans))
    except Exception as e:  # noqa: BLE001
        emit(note=f"chdb failed: {e}")


def run_polars(args):
    pl = optional_import("polars")
    if pl is None:
        return

    def q():
        t = pl.scan_parquet(f"{args.data}/trades/*.parquet").select("ts", "sym")
        p = pl.scan_parquet(f"{args.data}/prices/*.parquet").select("ts", "sym", "bid", "ask")
        out = (t.join_asof(p, on="ts", by="sym", strategy="backward", check_sortedness=False)
               .select(pl.len().alias("n"), pl.col("bid").count().alias("matched"),
                       pl.col("bid").sum().alias("sum_bid"), pl.col("ask").sum().alias("sum_ask"))
               .collect())
        return out.row(0)

    try:
        times, ans = timed(args.runs, q)
        emit(engine=f"Polars {pl.__version__} join_asof(by=sym)", query="asof",
             times=times, answer=answer(ans))
    except Exception as e:  # noqa: BLE001
        emit(note=f"polars failed: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="duckdb,chdb,polars")
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    os.environ["POLARS_MAX_THREADS"] = str(args.threads)
    for engine in args.engines.split(","):
        print(f"peers: {engine} asof", file=sys.stderr, flush=True)
        {"duckdb": run_duckdb, "chdb": run_chdb, "polars": run_polars}[engine](args)


if __name__ == "__main__":
    main()
