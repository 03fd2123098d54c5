//! One `SessionContext` serving many queries at once: 16 concurrent
//! queries of every kind give the answers they give one at a time, with no
//! deadlock.

use crate::support::{cells, context};
use datafusion::datasource::MemTable;
use datafusion_tsjoin::TsJoinContextExt;
use datafusion_tsjoin::testing::reference::{random_rows, schema, split};
use datafusion_tsjoin::testing::{MIXED_QUERIES as QUERIES, Rng};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_queries_answer_as_serial_ones() {
    let ctx = context(4);
    let mut rng = Rng::new(16);
    let left = random_rows(&mut rng, 3_000, 20_000, 8);
    let mut right = random_rows(&mut rng, 30_000, 20_000, 8);
    right.sort_by_key(|r| r.ts);
    for (name, rows) in [("l", &left), ("r", &right)] {
        let parts = split(&mut rng, rows, 3);
        let parts = parts
            .into_iter()
            .map(|p| {
                // Fewer, larger batches than split's 1–7 rows.
                let batch =
                    datafusion::arrow::compute::concat_batches(&schema(), &p).unwrap();
                vec![batch]
            })
            .collect();
        ctx.register_table(name, Arc::new(MemTable::try_new(schema(), parts).unwrap()))
            .unwrap();
    }
    let mut serial = vec![];
    for sql in QUERIES {
        let rows = cells(&ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap());
        assert!(!rows.is_empty(), "{sql}");
        serial.push(rows);
    }
    let serial = Arc::new(serial);
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (ctx, serial) = (ctx.clone(), Arc::clone(&serial));
            tokio::spawn(async move {
                for round in 0..3 {
                    let q = (t * 7 + round * 3) % QUERIES.len();
                    let batches = ctx.tsjoin_sql(QUERIES[q]).await?.collect().await?;
                    assert!(
                        cells(&batches) == serial[q],
                        "task {t} round {round}: {}",
                        QUERIES[q]
                    );
                }
                Ok::<_, datafusion::common::DataFusionError>(())
            })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    let joined = tokio::time::timeout(Duration::from_secs(300), all)
        .await
        .expect("16 concurrent queries deadlocked or took over 5 minutes");
    for j in joined {
        j.unwrap().unwrap();
    }
}
