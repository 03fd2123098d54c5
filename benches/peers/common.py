"""What the peer scripts share: the JSON-lines protocol the Rust runners
read, a DuckDB connection set to the runner's thread count, and the whole
script for runners that hand over their queries in each engine's
dialect (`view_peers`)."""
import argparse
import datetime
import decimal
import importlib
import json
import os
import time


def emit(**kw):
    """One JSON object per line on stdout (results or {"note": ...})."""
    print(json.dumps(kw), flush=True)


def duckdb_connection(threads):
    """`(duckdb module, connection)` with `threads` threads, or None (and a
    note) when DuckDB is not installed."""
    try:
        import duckdb
    except ImportError:
        emit(note="duckdb not installed (pip install duckdb)")
        return None
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    return duckdb, con


def fetch_arrow(con, sql):
    """The whole result as a pyarrow Table, without the extra copy a DB-API
    cursor makes (DuckDB 2.0 renamed the call)."""
    rel = con.sql(sql)
    if hasattr(rel, "to_arrow_table"):
        return rel.to_arrow_table()
    return rel.arrow()


def timed(runs, fn):
    """`(times, last answer)`: `fn()` run `runs` times, each timed in
    seconds with the monotonic performance counter."""
    times, answer = [], None
    for _ in range(runs):
        t = time.perf_counter()
        answer = fn()
        times.append(time.perf_counter() - t)
    return times, answer


def evict(path):
    """Drops every file under `path` from the OS page cache
    (`posix_fadvise(DONTNEED)`, as the Rust runner's `page_cache::evict`),
    so that the next read comes from the disk."""
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measured(args, fn):
    """`fields` for `emit`: `times` and `answer` of `timed(args.runs, fn)`,
    after, with `--cold`, an untimed run and then one with the data dropped
    from the page cache just before (its time as `cold`): as the Rust
    runner, after a warm-up, so that the cache is the only difference."""
    fields = {}
    if args.cold:
        fn()
        evict(args.data)
        t = time.perf_counter()
        fn()
        fields["cold"] = time.perf_counter() - t
    times, answer = timed(args.runs, fn)
    fields.update(times=times, answer=answer_rows(answer))
    return fields


def optional_import(name):
    """The module `name` (`chdb`, `polars`), or None and a note when it is
    not installed: a missing peer is reported, not fatal."""
    try:
        return importlib.import_module(name)
    except ImportError:
        emit(note=f"{name} not installed (pip install {name})")
        return None


def chdb_session(threads):
    """`(chdb module, session)` with `threads` threads, or None (and a
    note) when chdb is not installed."""
    chdb = optional_import("chdb")
    if chdb is None:
        return None
    from chdb import session as chs

    sess = chs.Session()
    sess.query(f"SET max_threads = {threads}")
    return chdb, sess


def cell(v):
    """One answer cell as the Rust runners spell it: NULL as "NULL", floats
    and decimals with 6 decimals, timestamps in ISO form (the runner
    canonicalises further)."""
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


def answer_rows(table):
    """A pyarrow Table as rows of "|"-joined cells."""
    cols = [c.to_pylist() for c in table.columns]
    return ["|".join(cell(c[i]) for c in cols) for i in range(table.num_rows)]


def _run_duckdb(args, queries, tables):
    got = duckdb_connection(args.threads)
    if got is None:
        return
    duckdb, con = got
    for t in tables:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{args.data}/{t}/*.parquet')")
    for q in queries:
        try:
            emit(engine=f"DuckDB {duckdb.__version__}", query=q["name"],
                 **measured(args, lambda: fetch_arrow(con, q["duckdb"])))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"DuckDB {q['name']} failed: {e}")


def _run_chdb(args, queries, tables):
    got = chdb_session(args.threads)
    if got is None:
        return
    chdb, sess = got
    sess.query("SET session_timezone = 'UTC'")
    for t in tables:
        sess.query(f"CREATE VIEW {t} AS SELECT * FROM file('{args.data}/{t}/*.parquet', Parquet)")
    for q in queries:
        try:
            emit(engine=f"ClickHouse (chdb {chdb.__version__})", query=q["name"],
                 **measured(args, lambda: sess.query(q["clickhouse"], "ArrowTable")))
        except Exception as e:  # noqa: BLE001 - report, keep going
            emit(note=f"chdb {q['name']} failed: {str(e)[:300]}")


def view_peers(tables):
    """The main of a peer script over `tables`, each a view over
    `<--data>/<table>/*.parquet` in DuckDB and in ClickHouse (chdb). The
    queries come from the Rust runner already in each engine's dialect
    (`--queries`, a JSON file: [{name, duckdb, clickhouse}]), so every
    engine answers the same parameters; each runs `--runs` times with
    `--threads` threads (after a warm-up and a cold run with `--cold`). Prints one JSON
    object per line: {"engine", "query", "times", "answer"[, "cold"]} or
    {"note"}."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", required=True, help="JSON file: [{name, duckdb, clickhouse}]")
    ap.add_argument("--engines", default="duckdb,chdb")
    ap.add_argument("--cold", action="store_true",
                    help="after a warm-up, run each query once with the data dropped from the page cache")
    args = ap.parse_args()
    with open(args.queries) as f:
        queries = json.load(f)
    engines = args.engines.split(",")
    if "duckdb" in engines:
        _run_duckdb(args, queries, tables)
    if "chdb" in engines:
        _run_chdb(args, queries, tables)
