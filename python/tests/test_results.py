"""Keeping and looking at results: COPY TO files, SHOW TABLES, show() and the notebook repr."""
import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import tsjoin

WINDOW_SQL = (
    "SELECT t.ts, t.symbol, count(*) AS quotes, max(p.ask) AS max_ask "
    "FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol "
    "RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW ORDER BY t.ts"
)


@pytest.fixture
def ctx(testdata):
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register_csv("trades", testdata / "trades.csv")
    ctx.register_csv("prices", testdata / "prices.csv")
    return ctx


@pytest.mark.parametrize("ext", ["parquet", "csv", "json"])
def test_copy_to_writes_at_once_and_round_trips(ctx, tmp_path, ext):
    expected = ctx.sql(WINDOW_SQL).to_arrow()
    path = tmp_path / f"out.{ext}"
    # Written by sql() itself, without converting the result.
    ctx.sql(f"COPY ({WINDOW_SQL}) TO '{path}'")
    assert path.is_file()
    if ext == "parquet":
        back = pq.read_table(path)
    elif ext == "csv":
        back = pacsv.read_csv(path)
    else:
        back = pa.Table.from_pylist([json.loads(line) for line in path.read_text().splitlines()])
    assert back.column_names == expected.column_names
    assert back.column("symbol").to_pylist() == expected.column("symbol").to_pylist()
    assert back.column("quotes").to_pylist() == expected.column("quotes").to_pylist()
    if ext == "parquet":
        # And the file reads back as a table.
        ctx.register_parquet("kept", path)
        assert ctx.sql("SELECT sum(quotes) AS n FROM kept").to_arrow().column("n")[0].as_py() == sum(
            expected.column("quotes").to_pylist()
        )


def test_copy_to_result_is_the_row_count(ctx, tmp_path):
    result = ctx.sql(f"COPY ({WINDOW_SQL}) TO '{tmp_path / 'o.parquet'}'").to_arrow()
    assert result.column(0).to_pylist() == [ctx.sql(WINDOW_SQL).to_arrow().num_rows]


def test_show_tables_and_describe(ctx):
    tables = ctx.sql("SHOW TABLES").to_arrow()
    names = set(tables.column("table_name").to_pylist())
    assert {"trades", "prices"} <= names
    described = ctx.sql("DESCRIBE trades").to_arrow()
    assert "symbol" in described.column("column_name").to_pylist()


def test_show_prints_a_table(ctx, capsys):
    ctx.sql(WINDOW_SQL).show()
    out = capsys.readouterr().out
    assert "| symbol" in out and "AAPL" in out
    ctx.sql(WINDOW_SQL).show(limit=2)
    out = capsys.readouterr().out
    assert "first 2 rows shown" in out
    assert out.count("AAPL") + out.count("MSFT") == 2


def test_html_repr_for_notebooks(ctx):
    html = ctx.sql(WINDOW_SQL + " LIMIT 2")._repr_html_()
    assert html.startswith("<table>")
    assert "<th>max_ask</th>" in html
    assert html.count("<tr>") == 3  # header and two rows
    escaped = ctx.sql("SELECT '<b>&' AS x")._repr_html_()
    assert "&lt;b&gt;&amp;" in escaped and "<b>" not in escaped


def test_no_internal_names_in_errors_or_columns(ctx):
    with pytest.raises(tsjoin.SQLError) as e:
        ctx.sql(
            "SELECT t.nope, avg(p.bid) FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol "
            "RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW"
        )
    assert "__tsjoin" not in str(e.value)
    result = ctx.sql(
        "SELECT t.ts, avg(p.bid) FROM trades t WINDOW JOIN prices p ON p.sym = t.symbol "
        "RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW"
    )
    assert result.schema.names == ["ts", "avg(p.bid)"]
    assert "__tsjoin" not in result.explain()
