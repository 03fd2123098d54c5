#!/usr/bin/env python3
"""Peers for `tsjoin-bench clickbench`: DuckDB and ClickHouse (chdb) on the
same Parquet files, ClickBench's 43 queries, each run --runs times.

The queries are DataFusion's text (benches/clickbench/queries.sql) with the
few spellings each engine needs changed (noted below); `hits` is a view
over the files that turns the day number EventDate into a date, as the
DataFusion setup does. Prints one JSON object per line:
{"engine", "query", "times", "rows", "error"} or {"note"}.
"""
import argparse
import os
import pathlib
import time

from common import chdb_session, duckdb_connection, emit, fetch_arrow

QUERIES = (pathlib.Path(__file__).resolve().parents[1] / "clickbench" / "queries.sql").read_text().splitlines()
QUERIES = [q.strip() for q in QUERIES if q.strip()]


def run(engine, execute, args):
    only = {int(x) for x in args.only.split(",")} if args.only else None
    for i, q in enumerate(QUERIES):
        if only is not None and i not in only:
            continue
        times, rows, error = [], None, None
        for _ in range(args.runs):
            t = time.perf_counter()
            try:
                n = execute(i, q)
                times.append(time.perf_counter() - t)
                rows = n if rows is None else rows
            except Exception as e:  # noqa: BLE001 - a failed run is null, as ClickBench records it
                times.append(None)
                error = error or str(e).splitlines()[0][:300]
        emit(engine=engine, query=i, times=times, rows=rows, error=error)


def duckdb_peer(args, files):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    con.execute(
        f"CREATE VIEW hits AS SELECT * REPLACE (DATE '1970-01-01' + CAST(\"EventDate\" AS INTEGER) AS \"EventDate\") "
        f"FROM read_parquet('{files}', binary_as_string = true)"
    )

    def execute(_, q):
        # DuckDB spells these differently: to_timestamp(seconds), strlen for bytes of a VARCHAR.
        q = q.replace("to_timestamp_seconds(", "to_timestamp(").replace("octet_length(", "strlen(")
        # Arrow out, as tsjoin's result stays Arrow (no Python objects per row).
        return fetch_arrow(con, q).num_rows

    run(f"DuckDB {duckdb.__version__}", execute, args)


def chdb_peer(args, files):
    got = chdb_session(args.threads)
    if got is None:
        return
    chdb, sess = got
    sess.query(
        f"CREATE VIEW hits AS SELECT * REPLACE (toDate(\"EventDate\") AS \"EventDate\") FROM file('{files}', Parquet)"
    )

    def execute(_, q):
        # ClickHouse: toDateTime for Unix seconds, length() counts bytes.
        q = q.replace("to_timestamp_seconds(", "toDateTime(").replace("octet_length(", "length(")
        out = sess.query(q, "CSV")
        return str(out).count("\n")

    run(f"ClickHouse (chdb {chdb.__version__})", execute, args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", required=True, help="a Parquet file or a directory of them")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    files = args.files
    if os.path.isdir(files):
        files = os.path.join(files, "*.parquet")
    for peer in (duckdb_peer, chdb_peer):
        peer(args, files)


if __name__ == "__main__":
    main()
