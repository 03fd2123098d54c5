#!/usr/bin/env python3
"""Peers for `tsjoin-bench horizon`: DuckDB, ClickHouse (chdb) and Polars on
the same Parquet files, each with its best rewrite of a HORIZON JOIN
markout: `avg((bid + ask) / 2 - price)` per offset, every trade matched
ASOF (by symbol) at `ts + offset`.

The rewrite all three support: expand the trades by the offsets (a cross
join with the offset list), then one ASOF join of the expanded trades
against the prices, grouped by offset. (A UNION ALL of one ASOF JOIN per
offset does the same work in more statements.) An inner ASOF join drops
trades without a match; the average ignores those anyway (NULL mid), so
the answers equal tsjoin's.

Prints one JSON object per line: {"engine", "query", "times", "answer"} or
{"note"}. Answers: "offset_us|markout" with 6 decimals.
"""
import argparse
import json
import warnings

from common import duckdb_connection, emit, optional_import, timed


def norm(rows):
    return [f"{int(o)}|{m:.6f}" if m is not None else f"{int(o)}|NULL" for o, m in rows]



def run_duckdb(args, shapes):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    trades = f"read_parquet('{args.data}/trades/*.parquet')"
    prices = f"read_parquet('{args.data}/prices/*.parquet')"
    for name, offsets in shapes.items():
        values = ", ".join(f"({o})" for o in offsets)
        sql = f"""
          WITH o(off) AS (VALUES {values}),
          t AS (SELECT t.sym, t.price, o.off, t.ts + to_microseconds(o.off) AS tt
                FROM {trades} t CROSS JOIN o)
          SELECT t.off, avg((p.bid + p.ask) / 2 - t.price)
          FROM t ASOF JOIN {prices} p ON t.sym = p.sym AND t.tt >= p.ts
          GROUP BY t.off ORDER BY t.off"""
        try:
            times, ans = timed(args.runs, lambda: con.execute(sql).fetchall())
            emit(engine=f"DuckDB {duckdb.__version__} ASOF JOIN over trades x offsets",
                 query=name, times=times, answer=norm(ans))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"DuckDB {name} failed: {e}")


def run_chdb(args, shapes):
    chdb = optional_import("chdb")
    if chdb is None:
        return
    trades = f"file('{args.data}/trades/*.parquet', Parquet)"
    prices = f"file('{args.data}/prices/*.parquet', Parquet)"
    for name, offsets in shapes.items():
        arr = "[" + ",".join(str(o) for o in offsets) + "]"
        sql = f"""
          SELECT t.off, avg((p.bid + p.ask) / 2 - t.price)
          FROM (SELECT sym, price, off, toUnixTimestamp64Micro(ts) + off AS tt
                FROM {trades} ARRAY JOIN {arr} AS off) AS t
          ASOF JOIN (SELECT sym, bid, ask, toUnixTimestamp64Micro(ts) AS pt FROM {prices}) AS p
            ON t.sym = p.sym AND t.tt >= p.pt
          GROUP BY t.off ORDER BY t.off
          SETTINGS max_threads = {args.threads}"""
        try:
            def q():
                res = chdb.query(sql, "JSONCompact")
                return [tuple(r) for r in json.loads(res.bytes())["data"]]
            times, ans = timed(args.runs, q)
            emit(engine=f"ClickHouse (chdb {chdb.__version__}) ASOF JOIN over trades x offsets",
                 query=name, times=times, answer=norm(ans))
        except Exception as e:  # noqa: BLE001
            emit(note=f"chdb {name} failed: {e}")


def run_polars(args, shapes):
    pl = optional_import("polars")
    if pl is None:
        return
    for name, offsets in shapes.items():
        def q():
            t = pl.scan_parquet(f"{args.data}/trades/*.parquet").select("ts", "sym", "price")
            p = (pl.scan_parquet(f"{args.data}/prices/*.parquet")
                 .select("ts", "sym", ((pl.col("bid") + pl.col("ask")) / 2).alias("mid"))
                 .sort("ts"))
            o = pl.LazyFrame({"off": offsets}, schema={"off": pl.Int64})
            e = (t.join(o, how="cross")
                 .with_columns((pl.col("ts") + pl.duration(microseconds=pl.col("off"))).alias("tt"))
                 .sort("tt"))
            j = e.join_asof(p, left_on="tt", right_on="ts", by="sym", strategy="backward")
            r = (j.group_by("off").agg((pl.col("mid") - pl.col("price")).mean())
                 .sort("off").collect())
            return list(r.iter_rows())
        try:
            times, ans = timed(args.runs, q)
            emit(engine=f"Polars {pl.__version__} join_asof over trades x offsets",
                 query=name, times=times, answer=norm(ans))
        except Exception as e:  # noqa: BLE001
            emit(note=f"Polars {name} failed: {e}")


def main():
    # Polars warns that it cannot check sortedness within `by` groups.
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--shapes", required=True,
                    help='JSON object: shape name -> offsets in microseconds')
    ap.add_argument("--engines", default="duckdb,chdb,polars")
    args = ap.parse_args()
    shapes = json.loads(args.shapes)
    engines = args.engines.split(",")
    if "duckdb" in engines:
        run_duckdb(args, shapes)
    if "chdb" in engines:
        run_chdb(args, shapes)
    if "polars" in engines:
        run_polars(args, shapes)


if __name__ == "__main__":
    main()
