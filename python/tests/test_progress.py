"""to_arrow(progress=...): snapshots to a callable, a bar on stderr; the answer unchanged."""
import pytest

import tsjoin


@pytest.fixture
def ctx(tmp_path):
    ctx = tsjoin.SessionContext(threads=2)
    ctx.sql("SET datafusion.execution.parquet.max_row_group_size = 8192")
    ctx.sql(
        "COPY (SELECT value % 13 AS k, value AS v FROM generate_series(1, 400000)) "
        f"TO '{tmp_path}/t.parquet'"
    )
    ctx.register_parquet("t", tmp_path / "t.parquet")
    return ctx


SQL = "SELECT k, count(*) AS n, sum(v) AS s FROM (SELECT * FROM t ORDER BY v DESC) GROUP BY k ORDER BY k"


def test_callable_gets_monotone_snapshots_ending_at_one(ctx):
    seen = []
    got = ctx.sql(SQL).to_arrow(progress=seen.append)
    assert got.equals(ctx.sql(SQL).to_arrow())
    assert got.num_rows == 13
    assert seen, "at least the final snapshot"
    fractions = [s["fraction"] for s in seen]
    assert fractions == sorted(fractions)
    assert all(f < 1.0 for s, f in zip(seen, fractions) if not s["finished"])
    last = seen[-1]
    assert last["finished"] and last["fraction"] == 1.0
    assert last["rows_read"] == last["rows_total"] == 400_000
    assert last["eta"] == 0.0
    names = [op["name"] for op in last["operators"]]
    assert "DataSourceExec" in names and "SortExec" in names
    assert all(op["state"] == "done" for op in last["operators"] if op["depth"] == 0)


def test_bar_on_stderr_only(ctx, capsys):
    got = ctx.sql(SQL).to_arrow(progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "100.0%" in err and "rows" in err
    assert got.num_rows == 13
    ctx.sql(SQL).to_arrow(progress=False)
    assert capsys.readouterr() == ("", "")


def test_a_failing_callback_stops_the_query(ctx):
    def boom(snapshot):
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        ctx.sql(SQL).to_arrow(progress=boom)
    # The session is still usable.
    assert ctx.sql("SELECT 1 AS x").to_arrow().column("x").to_pylist() == [1]


def test_progress_must_be_a_flag_or_callable(ctx):
    with pytest.raises(TypeError, match="progress"):
        ctx.sql(SQL).to_arrow(progress=3)
