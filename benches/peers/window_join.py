#!/usr/bin/env python3
"""Peers for `tsjoin-bench window-join`: DuckDB, ClickHouse (chdb) and Polars
on the same Parquet files, each with its best rewrite of the WINDOW JOIN.

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"} when an engine is not installed or fails. Answers are normalised
like the Rust runner's: "id|sym|values", floats with 6 decimals.
"""
import argparse
import json
import os
import sys

from common import duckdb_connection, emit, optional_import, timed


def norm(rows):
    out = []
    for r in rows:
        cells = []
        for v in r:
            if v is None:
                cells.append("NULL")
            elif isinstance(v, float):
                cells.append(f"{v:.6f}")
            else:
                cells.append(str(v))
        out.append("|".join(cells))
    return out



AGGS = "avg(bid) {w} AS avg_bid, avg(ask) {w} AS avg_ask, min(bid) {w} AS min_bid, max(bid) {w} AS max_bid, min(ask) {w} AS min_ask, max(ask) {w} AS max_ask"
PAGGS = "avg(p.bid) AS avg_bid, avg(p.ask) AS avg_ask, min(p.bid) AS min_bid, max(p.bid) AS max_bid, min(p.ask) AS min_ask, max(p.ask) AS max_ask"


def duckdb_queries(trades, prices):
    window = f"""
      WITH u AS (SELECT id, ts, sym, CAST(NULL AS DOUBLE) AS bid, CAST(NULL AS DOUBLE) AS ask FROM {trades}
                 UNION ALL SELECT CAST(NULL AS BIGINT), ts, sym, bid, ask FROM {prices}),
      w AS (SELECT id, sym, {AGGS.format(w='OVER win')} FROM u
            WINDOW win AS (PARTITION BY sym ORDER BY ts RANGE BETWEEN INTERVAL 1 SECOND PRECEDING AND INTERVAL 1 SECOND FOLLOWING))
      SELECT * FROM w WHERE id IS NOT NULL ORDER BY avg_bid + avg_ask DESC NULLS LAST, id LIMIT 10"""
    bucketed = f"""
      WITH tb AS (SELECT t.id, t.ts, t.sym, epoch_us(t.ts) // 1000000 + d.d AS b
                  FROM {trades} t CROSS JOIN (VALUES (-1), (0), (1)) AS d(d)),
      pb AS (SELECT ts, sym, bid, ask, epoch_us(ts) // 1000000 AS b FROM {prices})
      SELECT tb.id, tb.sym, {PAGGS.replace('p.', 'pb.')}
      FROM tb JOIN pb ON tb.sym = pb.sym AND tb.b = pb.b
        AND pb.ts BETWEEN tb.ts - INTERVAL 1 SECOND AND tb.ts + INTERVAL 1 SECOND
      GROUP BY tb.id, tb.sym ORDER BY avg_bid + avg_ask DESC NULLS LAST, tb.id LIMIT 10"""
    return {"window over UNION ALL": window, "bucketed equi-join": bucketed}


def run_duckdb(args):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    trades = f"read_parquet('{args.data}/trades/*.parquet')"
    prices = f"read_parquet('{args.data}/prices/*.parquet')"
    for name, sql in duckdb_queries(trades, prices).items():
        try:
            times, ans = timed(args.runs, lambda: con.execute(sql).fetchall())
            emit(engine=f"DuckDB {duckdb.__version__} {name}", query="q1", times=times, answer=norm(ans))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"DuckDB {name} failed: {e}")


def run_chdb(args):
    chdb = optional_import("chdb")
    if chdb is None:
        return
    trades = f"file('{args.data}/trades/*.parquet', Parquet)"
    prices = f"file('{args.data}/prices/*.parquet', Parquet)"
    sql = f"""
      WITH u AS (SELECT CAST(id AS Nullable(Int64)) AS id, toUnixTimestamp64Micro(ts) AS t, sym,
                        CAST(NULL AS Nullable(Float64)) AS bid, CAST(NULL AS Nullable(Float64)) AS ask FROM {trades}
                 UNION ALL SELECT CAST(NULL AS Nullable(Int64)), toUnixTimestamp64Micro(ts), sym,
                        CAST(bid AS Nullable(Float64)), CAST(ask AS Nullable(Float64)) FROM {prices}),
      w AS (SELECT id, sym, {AGGS.format(w='OVER win')} FROM u
            WINDOW win AS (PARTITION BY sym ORDER BY t RANGE BETWEEN 1000000 PRECEDING AND 1000000 FOLLOWING))
      SELECT id, sym, avg_bid, avg_ask, min_bid, max_bid, min_ask, max_ask FROM w WHERE id IS NOT NULL
      ORDER BY avg_bid + avg_ask DESC NULLS LAST, id LIMIT 10
      SETTINGS max_threads = {args.threads}"""
    try:
        def q():
            res = chdb.query(sql, "JSONCompact")
            return [tuple(r) for r in json.loads(res.bytes())["data"]]
        times, ans = timed(args.runs, q)
        emit(engine=f"ClickHouse (chdb {chdb.__version__}) window over UNION ALL", query="q1", times=times, answer=norm(ans))
    except Exception as e:  # noqa: BLE001
        emit(note=f"chdb failed: {e}")


def run_polars(args):
    pl = optional_import("polars")
    if pl is None:
        return

    def q():
        t = pl.scan_parquet(f"{args.data}/trades/*.parquet").select(
            "id", "ts", "sym", pl.lit(None, pl.Float64).alias("bid"), pl.lit(None, pl.Float64).alias("ask"))
        p = pl.scan_parquet(f"{args.data}/prices/*.parquet").select(
            pl.lit(None, pl.Int64).alias("id"), "ts", "sym", "bid", "ask")
        u = pl.concat([t, p]).sort("sym", "ts").collect()
        aggs = [pl.col("bid").mean().alias("avg_bid"), pl.col("ask").mean().alias("avg_ask"),
                pl.col("bid").min().alias("min_bid"), pl.col("bid").max().alias("max_bid"),
                pl.col("ask").min().alias("min_ask"), pl.col("ask").max().alias("max_ask")]
        # `rolling` yields one window per input row, in input order (sorted
        # by sym, ts): line the windows up with the rows' ids by position.
        out = u.rolling(index_column="ts", period="2s", offset="-1s", closed="both", group_by="sym").agg(*aggs)
        assert out["ts"].equals(u["ts"]) and out["sym"].equals(u["sym"]), "rolling reordered rows"
        out = (out.with_columns(u["id"])
               .filter(pl.col("id").is_not_null())
               .sort(pl.col("avg_bid") + pl.col("avg_ask"), "id", descending=[True, False], nulls_last=True)
               .head(10)
               .select("id", "sym", "avg_bid", "avg_ask", "min_bid", "max_bid", "min_ask", "max_ask"))
        return out.rows()

    try:
        times, ans = timed(args.runs, q)
        emit(engine=f"Polars {pl.__version__} rolling over the union", query="q1", times=times, answer=norm(ans))
    except Exception as e:  # noqa: BLE001
        emit(note=f"polars failed: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--queries", default="q1")
    ap.add_argument("--engines", default="duckdb,chdb,polars")
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    os.environ["POLARS_MAX_THREADS"] = str(args.threads)
    if "q1" not in args.queries.split(","):
        return
    for engine in args.engines.split(","):
        print(f"peers: {engine} q1", file=sys.stderr, flush=True)
        {"duckdb": run_duckdb, "chdb": run_chdb, "polars": run_polars}[engine](args)


if __name__ == "__main__":
    main()
