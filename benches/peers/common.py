"""What the peer scripts share: the JSON-lines protocol the Rust runners
read, and a DuckDB connection set to the runner's thread count."""
import importlib
import json
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
