#!/usr/bin/env python3
"""Peers for `tsjoin-bench groupby`: DuckDB and Polars on the same Parquet
files, each query materialised in full (DuckDB to an Arrow table, Polars to
a DataFrame), as the Rust runner collects its record batches.

Reads the cells (JSON list of {dir, table, keys, aggs, sql}) and prints one
JSON object per line: {"cell", "engine", "times", "checksum"} or {"note"}.
The checksum matches the runner's: rows, then the sum of each aggregate
column (integers exactly, floats as %.6e).
"""
import argparse
import json
import os
import sys

from common import duckdb_connection, emit, fetch_arrow, optional_import, timed


def checksum(columns, rows):
    parts = [str(rows)]
    for values in columns:
        vals = [v for v in values if v is not None]
        if any(isinstance(v, float) for v in vals):
            # As Rust's `{:.6e}` writes it: no '+', no leading exponent zeros.
            mantissa, exp = f"{float(sum(vals)):.6e}".split("e")
            parts.append(f"{mantissa}e{int(exp)}")
        else:
            parts.append(str(int(sum(vals))))
    return "|".join(parts)



def run_duckdb(cells, args):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    for i, c in enumerate(cells):
        con.execute(f"CREATE OR REPLACE VIEW {c['table']} AS SELECT * FROM read_parquet('{c['dir']}/*.parquet')")
        try:
            times, table = timed(args.runs, lambda: fetch_arrow(con, c["sql"]))
            cols = [table.column(j).to_pylist() for j in range(len(c["keys"]), table.num_columns)]
            emit(cell=i, engine=f"DuckDB {duckdb.__version__}", times=times, checksum=checksum(cols, table.num_rows))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"DuckDB failed on cell {i}: {e}")


def run_polars(cells, args):
    pl = optional_import("polars")
    if pl is None:
        return
    for i, c in enumerate(cells):
        aggs = []
        for j, a in enumerate(c["aggs"]):
            if a == "count":
                aggs.append(pl.len().alias(f"a{j}"))
            else:
                aggs.append(pl.col(a.split(":", 1)[1]).sum().alias(f"a{j}"))

        def q(c=c, aggs=aggs):
            return pl.scan_parquet(f"{c['dir']}/*.parquet").group_by(c["keys"]).agg(aggs).collect()

        try:
            times, df = timed(args.runs, q)
            cols = [df[f"a{j}"].to_list() for j in range(len(c["aggs"]))]
            emit(cell=i, engine=f"Polars {pl.__version__}", times=times, checksum=checksum(cols, df.height))
        except Exception as e:  # noqa: BLE001
            emit(note=f"Polars failed on cell {i}: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    os.environ["POLARS_MAX_THREADS"] = str(args.threads)
    cells = json.load(open(args.cells))
    for name, fn in [("duckdb", run_duckdb), ("polars", run_polars)]:
        print(f"peers: {name}", file=sys.stderr, flush=True)
        fn(cells, args)


if __name__ == "__main__":
    main()
