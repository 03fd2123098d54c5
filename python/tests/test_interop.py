"""Round trips through pyarrow, pandas and polars: types, NULLs, zero copy."""
import datetime as dt

import pyarrow as pa
import pytest

import tsjoin


def roundtrip(data):
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", data)
    return ctx.sql("SELECT * FROM t").to_arrow()


def test_pyarrow_types_and_nulls_survive():
    table = pa.table({
        "ts": pa.array([0, 1_500_000, None], pa.timestamp("us", tz="Europe/Paris")),
        "ns": pa.array([1, None, 3], pa.timestamp("ns")),
        "sym": pa.array(["a", None, "a"]).dictionary_encode(),
        "s": pa.array(["x", "y", None], pa.string()),
        "i": pa.array([1, None, -3], pa.int32()),
        "f": pa.array([1.5, float("nan"), None], pa.float64()),
        "b": pa.array([True, None, False]),
        "d": pa.array([dt.date(2024, 1, 2), None, dt.date(1970, 1, 1)]),
    })
    out = roundtrip(table)
    assert out.schema.field("ts").type == pa.timestamp("us", tz="Europe/Paris")
    assert pa.types.is_dictionary(out.schema.field("sym").type)
    for name in table.column_names:
        assert out.column(name).cast(table.schema.field(name).type).to_pylist() == table.column(name).to_pylist() or name == "f"
    f = out.column("f").to_pylist()
    assert f[0] == 1.5 and f[1] != f[1] and f[2] is None


def test_record_batch_reader_and_batches_register():
    batch = pa.record_batch({"x": [1, 2, 3]})
    assert roundtrip(batch).num_rows == 3
    assert roundtrip([batch, batch]).num_rows == 6
    reader = pa.RecordBatchReader.from_batches(batch.schema, [batch] * 4)
    assert roundtrip(reader).num_rows == 12


def test_large_table_is_split_for_parallel_scans():
    n = 300_000
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", pa.table({"k": [i % 7 for i in range(n)], "v": list(range(n))}))
    out = ctx.sql("SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k ORDER BY k").to_arrow()
    assert sum(out.column("c").to_pylist()) == n
    assert sum(out.column("s").to_pylist()) == n * (n - 1) // 2


def test_pandas_round_trip():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({
        "ts": pd.to_datetime(["2024-01-01 09:30:00", "2024-01-01 09:30:01", None]).tz_localize("UTC"),
        "sym": pd.Categorical(["AAPL", "MSFT", None]),
        "px": [1.0, None, 3.0],
        "q": pd.array([1, None, 3], dtype="Int64"),
    })
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", df)
    out = ctx.sql("SELECT * FROM t").to_pandas()
    assert list(out.columns) == ["ts", "sym", "px", "q"]
    assert str(out["ts"].dtype).startswith("datetime64") and "UTC" in str(out["ts"].dtype)
    assert out["ts"].iloc[0] == df["ts"].iloc[0] and pd.isna(out["ts"].iloc[2])
    assert list(out["sym"].astype(object).where(out["sym"].notna(), None)) == ["AAPL", "MSFT", None]
    assert out["px"].iloc[0] == 1.0 and pd.isna(out["px"].iloc[1])
    assert out["q"].iloc[0] == 1 and pd.isna(out["q"].iloc[1])


def test_polars_round_trip():
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({
        "ts": pl.Series([dt.datetime(2024, 1, 1, 9, 30), None], dtype=pl.Datetime("us", "Asia/Tokyo")),
        "sym": pl.Series(["a", None], dtype=pl.Categorical),
        "v": [1, None],
        "s": ["x", None],
    })
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", df)
    out = ctx.sql("SELECT * FROM t").to_polars()
    assert out.columns == ["ts", "sym", "v", "s"]
    assert out["ts"].dtype == pl.Datetime("us", "Asia/Tokyo")
    assert out["ts"].to_list() == df["ts"].to_list()
    assert out["sym"].cast(pl.String).to_list() == ["a", None]
    assert out["v"].to_list() == [1, None] and out["s"].to_list() == ["x", None]
    # and polars reads a result straight through the PyCapsule interface
    assert pl.DataFrame(ctx.sql("SELECT v FROM t")).height == 2


def test_unsupported_data_is_a_type_error():
    ctx = tsjoin.SessionContext()
    with pytest.raises(TypeError, match="cannot register"):
        ctx.register("t", {"a": [1]})
