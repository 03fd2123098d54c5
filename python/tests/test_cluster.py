"""Queries sent to a cluster (a scheduler and executors started in this
process) answer as they do locally."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tsjoin


@pytest.fixture(scope="module")
def cluster_url():
    return tsjoin.start_local_cluster(executors=2, tasks_per_executor=1)


def _tables(tmp_path):
    trades = pa.table(
        {
            "ts": pa.array([1_000_000, 2_000_000, 3_000_000, 4_000_000], pa.timestamp("us")),
            "sym": ["a", "b", "a", "b"],
            "qty": [1, 2, 3, 4],
        }
    )
    prices = pa.table(
        {
            "ts": pa.array([500_000, 1_500_000, 2_500_000, 3_500_000], pa.timestamp("us")),
            "sym": ["a", "b", "a", "b"],
            "bid": [10.0, 20.0, 11.0, 21.0],
        }
    )
    pq.write_table(trades, tmp_path / "trades.parquet")
    pq.write_table(prices, tmp_path / "prices.parquet")


QUERIES = [
    "SELECT t.ts, t.sym, count(*) AS n, avg(p.bid) AS b FROM trades t "
    "WINDOW JOIN prices p ON (sym) RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW ORDER BY t.ts",
    "SELECT t.ts, t.sym, p.bid FROM trades t ASOF JOIN prices p ON (sym) ORDER BY t.ts",
    "SELECT sym, sum(qty) AS q, approx_percentile(qty, 0.5) AS p50 FROM trades GROUP BY sym ORDER BY sym",
]


@pytest.mark.parametrize("query", QUERIES)
def test_cluster_answers_as_locally(cluster_url, tmp_path, query):
    _tables(tmp_path)
    local = tsjoin.SessionContext(threads=2)
    remote = tsjoin.SessionContext(threads=2, cluster=cluster_url)
    for ctx in (local, remote):
        ctx.register_parquet("trades", str(tmp_path / "trades.parquet"))
        ctx.register_parquet("prices", str(tmp_path / "prices.parquet"))
    assert remote.sql(query).to_arrow().to_pydict() == local.sql(query).to_arrow().to_pydict()


def test_cluster_needs_an_address(tmp_path):
    with pytest.raises(tsjoin.TsJoinError):
        tsjoin.SessionContext(cluster="localhost:1")
    with pytest.raises(ValueError):
        tsjoin.SessionContext(cluster="df://localhost:1", memory_limit=1 << 20)
