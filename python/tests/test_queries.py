"""SQL through Python: WINDOW JOIN against the CLI, GROUP BY, settings, EXPLAIN, errors."""
import csv
import io
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tsjoin

WINDOW_SQL = (
    "SELECT t.ts, t.symbol, t.price, count(*) AS quotes, avg(p.bid) AS avg_bid, max(p.ask) AS max_ask "
    "FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol "
    "RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING INCLUDE PREVAILING ORDER BY t.ts, t.symbol"
)


def test_window_join_equals_the_cli(testdata, cli):
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register_csv("trades", testdata / "trades.csv")
    ctx.register_csv("prices", testdata / "prices.csv")
    got = ctx.sql(WINDOW_SQL).to_arrow()
    out = subprocess.run(
        [cli, "--table", f"trades={testdata / 'trades.csv'}", "--table", f"prices={testdata / 'prices.csv'}",
         "--format", "csv", "-c", WINDOW_SQL],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == got.column_names
    assert len(rows) - 1 == got.num_rows > 0

    def norm(v):
        if v is None or v == "":
            return None
        try:
            return round(float(v), 9)
        except (TypeError, ValueError):
            return str(v).replace(" ", "T")

    py_rows = [[norm(v) for v in row.values()] for row in got.to_pylist()]
    cli_rows = [[norm(v) for v in row] for row in rows[1:]]
    # timestamps print differently (datetime vs ISO text): compare the rest exactly
    assert [r[1:] for r in py_rows] == [r[1:] for r in cli_rows]
    assert all(str(a).startswith(b[:19]) for a, b in ((r[0], c[0]) for r, c in zip(py_rows, cli_rows)))


def test_window_join_over_parquet_with_designated_timestamp(tmp_path):
    trades = pa.table({
        "ts": pa.array([1_000_000, 2_000_000, 3_000_000], pa.timestamp("us")),
        "created": pa.array([0, 0, 0], pa.timestamp("us")),
        "sym": ["A", "B", "A"],
    })
    prices = pa.table({
        "ts": pa.array([500_000, 1_500_000, 2_500_000, 2_900_000], pa.timestamp("us")),
        "sym": ["A", "B", "A", "A"],
        "bid": [1.0, 2.0, 3.0, 4.0],
    })
    (tmp_path / "trades").mkdir()
    pq.write_table(trades, tmp_path / "trades" / "part-0.parquet")
    pq.write_table(prices, tmp_path / "prices.parquet")
    ctx = tsjoin.connect(threads=2)
    ctx.register_parquet("trades", tmp_path / "trades", timestamp="ts")
    ctx.register_parquet("prices", tmp_path / "prices.parquet")
    out = ctx.sql(
        "SELECT t.ts, sum(p.bid) AS s FROM trades t WINDOW JOIN prices p ON p.sym = t.sym "
        "RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW EXCLUDE PREVAILING ORDER BY t.ts"
    ).to_arrow()
    assert out.column("s").to_pylist() == [1.0, 2.0, 7.0]


def test_group_by_and_explain_names_the_inline_operator():
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", pa.table({"k": [1, 2, 1, None], "v": [1, 2, 3, 4]}))
    q = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k ORDER BY k NULLS LAST"
    assert ctx.sql(q).to_arrow().to_pydict() == {"k": [1, 2, None], "n": [2, 1, 1], "s": [4, 2, 4]}
    assert "InlineAggregateExec" in ctx.sql(q).explain()
    ctx.set("tsjoin.inline_aggregate", False)
    assert ctx.get("tsjoin.inline_aggregate") == "false"
    assert "InlineAggregateExec" not in ctx.sql(q).explain()
    assert ctx.sql(q).to_arrow().to_pydict()["s"] == [4, 2, 4]
    analyzed = ctx.sql(q).explain(analyze=True)
    assert "output_rows" in analyzed


def test_settings_at_construction_choose_the_window_join_path(testdata):
    ctx = tsjoin.SessionContext(threads=2, settings={"tsjoin.window_join_fast_path": False})
    ctx.register_csv("trades", testdata / "trades.csv")
    ctx.register_csv("prices", testdata / "prices.csv")
    assert "path=general" in ctx.sql(WINDOW_SQL).explain()
    ctx.set("tsjoin.window_join_fast_path", True)
    ctx.set("tsjoin.window_join_simd", False)
    assert "path=fast, kernels=scalar" in ctx.sql(WINDOW_SQL).explain()


def test_streaming_reader_and_capsule():
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", pa.table({"x": list(range(100_000))}))
    result = ctx.sql("SELECT x * 2 AS y FROM t")
    reader = result.to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert sum(b.num_rows for b in reader) == 100_000
    table = pa.table(result)  # through __arrow_c_stream__
    assert table.num_rows == 100_000 and table.schema == result.schema


def test_sql_errors_are_sql_errors():
    ctx = tsjoin.SessionContext()
    with pytest.raises(tsjoin.SQLError, match="(?i)table.*not found|nope"):
        ctx.sql("SELECT * FROM nope")
    with pytest.raises(tsjoin.SQLError):
        ctx.sql("SELEC 1")
    with pytest.raises(tsjoin.SQLError):
        ctx.sql("SELECT 1 FROM t WINDOW JOIN")
    assert issubclass(tsjoin.SQLError, tsjoin.TsJoinError)
    with pytest.raises(tsjoin.TsJoinError):
        ctx.set("tsjoin.no_such_setting", "1")


def test_execution_errors_are_execution_errors(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet PAR1")
    ctx = tsjoin.SessionContext()
    with pytest.raises(tsjoin.TsJoinError):
        ctx.register_parquet("b", bad)
        ctx.sql("SELECT * FROM b").to_arrow()
    # One partition: with two, DataFusion 55.2's repartition can stall when
    # it spills under so small a limit (apache/datafusion#24883).
    small = tsjoin.SessionContext(threads=1, memory_limit=256 * 1024)
    small.register("t", pa.table({"k": list(range(300_000)), "v": list(range(300_000))}))
    with pytest.raises(tsjoin.ExecutionError, match="(?i)resources exhausted"):
        small.sql("SELECT k, sum(v) FROM t GROUP BY k").to_arrow()
    with pytest.raises(tsjoin.ExecutionError):
        ctx.sql("SELECT CAST('x' AS INT)").to_arrow()


def test_missing_file_is_an_error(tmp_path):
    ctx = tsjoin.SessionContext()
    with pytest.raises(tsjoin.TsJoinError):
        ctx.register_parquet("m", tmp_path / "missing.parquet")


def test_priority_per_query_and_bad_values():
    ctx = tsjoin.SessionContext(threads=2)
    sql = "EXPLAIN ANALYZE SELECT count(*) FROM (VALUES (1), (2)) t(x) WHERE x > 0"
    for priority, shown in [("low", "priority=low"), (5, "priority=5"), (None, "priority=normal")]:
        plan = ctx.sql(sql, priority=priority).to_arrow().column(1)[0].as_py()
        assert shown in plan, plan
    assert ctx.sql("SELECT 41 + 1 AS x", priority="high").to_arrow().column(0)[0].as_py() == 42
    with pytest.raises(ValueError, match="expected high, normal, low or an integer"):
        ctx.sql("SELECT 1", priority="urgent")
