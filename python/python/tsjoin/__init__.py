"""tsjoin: time-series SQL (QuestDB-style WINDOW JOIN, fast GROUP BY) on Apache DataFusion.

>>> import pyarrow as pa, tsjoin
>>> ctx = tsjoin.SessionContext(threads=2)
>>> ctx.register("t", pa.table({"k": [1, 1, 2], "v": [1.0, 2.0, 3.0]}))
>>> ctx.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k").to_arrow().to_pydict()
{'k': [1, 2], 's': [3.0, 3.0]}
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

from . import _tsjoin
from ._tsjoin import ExecutionError, Result, SQLError, TsJoinError

__version__ = _tsjoin.__version__
__all__ = ["SessionContext", "Result", "TsJoinError", "SQLError", "ExecutionError", "connect", "start_local_cluster", "__version__"]


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _arrow_stream(data: Any) -> Any:
    """Something with ``__arrow_c_stream__`` for ``data``."""
    if hasattr(data, "__arrow_c_stream__"):
        return data
    import pyarrow as pa

    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, (list, tuple)) and data and all(isinstance(b, pa.RecordBatch) for b in data):
        return pa.Table.from_batches(list(data))
    raise TypeError(
        f"cannot register {type(data).__name__}: pass a pyarrow Table, RecordBatch or RecordBatchReader, "
        "a pandas or polars DataFrame, or any object with __arrow_c_stream__"
    )


class SessionContext:
    """A tsjoin session: tables, settings, and SQL with WINDOW JOIN.

    ``threads`` sets the partitions every query runs on (default: all cores),
    ``memory_limit`` a memory budget in bytes (past it DataFusion's sort and
    aggregate spill to ``spill_dir``, default the system's temporary
    directory, the inline GROUP BY hands over to DataFusion's, and an operator
    that cannot spill fails with :class:`ExecutionError`), ``settings`` any
    ``tsjoin.*`` or ``datafusion.*`` setting, e.g.
    ``{"tsjoin.window_join_simd": False}``.

    ``cluster="df://HOST:PORT"`` sends the queries to a cluster scheduler
    (``tsjoin-cli scheduler``; :func:`start_local_cluster` starts one in this
    process): tables must be files every executor can read
    (:meth:`register_parquet`, :meth:`register_csv`), and memory limits are
    the executors'.
    """

    def __init__(
        self,
        threads: Optional[int] = None,
        memory_limit: Optional[int] = None,
        settings: Optional[Mapping[str, Any]] = None,
        spill_dir: Optional[Union[str, os.PathLike]] = None,
        cluster: Optional[str] = None,
    ) -> None:
        converted = {k: _setting(v) for k, v in (settings or {}).items()}
        spill = None if spill_dir is None else os.fspath(spill_dir)
        self._ctx = _tsjoin.SessionContext(threads, memory_limit, converted, spill, cluster)

    def set(self, key: str, value: Any) -> None:
        """Changes a setting, as SQL's ``SET key = value``."""
        self._ctx.set(key, _setting(value))

    def get(self, key: str) -> str:
        """A setting's current value."""
        return self._ctx.get(key)

    def register_parquet(self, name: str, path: str, timestamp: Optional[str] = None) -> None:
        """Registers a Parquet file or directory; ``timestamp`` names its designated timestamp."""
        self._ctx.register_parquet(name, str(path), timestamp)

    def register_csv(self, name: str, path: str, timestamp: Optional[str] = None) -> None:
        """Registers a CSV file with a header row."""
        self._ctx.register_csv(name, str(path), timestamp)

    def register(self, name: str, data: Any, timestamp: Optional[str] = None) -> None:
        """Registers in-memory data: pyarrow, pandas, polars or any Arrow C stream (zero copy where Arrow allows)."""
        self._ctx.register_arrow(name, _arrow_stream(data), timestamp)

    def deregister(self, name: str) -> None:
        """Drops a registered table."""
        self._ctx.deregister(name)

    def set_designated_timestamp(self, table: str, column: str) -> None:
        """Names a table's designated timestamp column (needed when it has several)."""
        self._ctx.set_designated_timestamp(table, column)

    def tables(self) -> list:
        """Names of the registered tables."""
        return self._ctx.tables()

    def sql(self, query: str, priority: Optional[Union[str, int]] = None) -> Result:
        """Plans ``query``; the :class:`Result` runs when converted or shown.

        DDL, ``SET`` and ``COPY (query) TO 'file'`` run at once: COPY writes
        Parquet, CSV or JSON (one object per line) by the file's extension,
        or as ``STORED AS PARQUET|CSV|JSON`` says, and its result is the row
        count. ``SHOW TABLES`` and ``DESCRIBE t`` list tables and columns.

        ``priority`` (``"high"``, ``"normal"``, ``"low"`` or an int) ranks
        the query against the others running in this process (threads):
        while a higher one runs, it pauses. Default: the session's
        ``tsjoin.priority``.
        """
        return self._ctx.sql(query, priority)


def start_local_cluster(executors: int = 2, tasks_per_executor: int = 1) -> str:
    """Starts a cluster scheduler and ``executors`` executors inside this
    process (loopback ports) and returns its address for
    ``SessionContext(cluster=...)``. It runs until the process exits.

    >>> import tsjoin
    >>> url = tsjoin.start_local_cluster(executors=2)
    >>> ctx = tsjoin.SessionContext(cluster=url)
    >>> ctx.sql("SELECT 1 + 1 AS two").to_arrow().to_pydict()
    {'two': [2]}
    """
    return _tsjoin.start_local_cluster(executors, tasks_per_executor)


def connect(
    threads: Optional[int] = None,
    memory_limit: Optional[int] = None,
    settings: Optional[Mapping[str, Any]] = None,
    spill_dir: Optional[Union[str, os.PathLike]] = None,
    cluster: Optional[str] = None,
) -> SessionContext:
    """A new :class:`SessionContext` (DuckDB-style spelling)."""
    return SessionContext(threads, memory_limit, settings, spill_dir, cluster)
