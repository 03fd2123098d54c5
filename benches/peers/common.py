"""What the peer scripts share: the JSON-lines protocol the Rust runners
read, and a DuckDB connection set to the runner's thread count."""
import json


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
