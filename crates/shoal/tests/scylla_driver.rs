//! The scylla Rust driver against a real `shoal server` process on loopback:
//! the core flow (schema, writes, prepared statements with token-aware
//! routing metadata, paging, batches, tokens) must work unchanged.

use std::ops::ControlFlow;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use scylla::statement::batch::Batch;
use scylla::statement::unprepared::Statement;

mod common;
use common::Node;

async fn connect(node: &Node) -> Session {
    SessionBuilder::new().known_node_addr(node.addr).build().await.expect("scylla driver connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_driver_core_flow() {
    let node = Node::start();
    let session = connect(&node).await;

    session
        .query_unpaged(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await
        .expect("create keyspace");
    session
        .query_unpaged("CREATE TABLE ks.events (k text, c int, v text, tags set<text>, PRIMARY KEY (k, c))", &[])
        .await
        .expect("create table");
    session.await_schema_agreement().await.expect("schema agreement");
    session.refresh_metadata().await.expect("refresh metadata");

    // Prepared statements carry the partition key indexes: token-aware routing.
    let insert =
        session.prepare("INSERT INTO ks.events (k, c, v, tags) VALUES (?, ?, ?, ?)").await.expect("prepare insert");
    assert!(insert.is_token_aware(), "prepared INSERT must carry pk indexes");
    for c in 0..250i32 {
        let tags: Vec<String> = vec![format!("t{}", c % 3)];
        session.execute_unpaged(&insert, ("a", c, format!("v{c}"), tags)).await.expect("insert");
    }

    // Read back one row.
    let select = session.prepare("SELECT c, v FROM ks.events WHERE k = ? AND c = ?").await.expect("prepare select");
    let rows = session.execute_unpaged(&select, ("a", 7i32)).await.expect("select").into_rows_result().expect("rows");
    let (c, v): (i32, String) = rows.single_row().expect("one row");
    assert_eq!((c, v.as_str()), (7, "v7"));

    // Page through 250 rows 100 at a time: every row once, in clustering order.
    let mut page = Statement::new("SELECT c FROM ks.events WHERE k = 'a'");
    page.set_page_size(100);
    let mut state = PagingState::start();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (result, next) = session.query_single_page(page.clone(), &[], state).await.expect("page");
        pages += 1;
        for row in result.into_rows_result().expect("rows").rows::<(i32,)>().expect("typed rows") {
            seen.push(row.expect("row").0);
        }
        match next.into_paging_control_flow() {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(s) => state = s,
        }
        assert!(pages < 10, "paging must terminate");
    }
    assert_eq!(seen, (0..250).collect::<Vec<i32>>());

    // A logged batch.
    let mut batch = Batch::default();
    batch.append_statement("INSERT INTO ks.events (k, c, v) VALUES ('b', 1, 'x')");
    batch.append_statement("UPDATE ks.events SET v = 'y' WHERE k = 'b' AND c = 2");
    session.batch(&batch, ((), ())).await.expect("batch");
    let rows = session
        .query_unpaged("SELECT count(*) FROM ks.events WHERE k = 'b'", &[])
        .await
        .expect("count")
        .into_rows_result()
        .expect("rows");
    let (count,): (i64,) = rows.single_row().expect("count row");
    assert_eq!(count, 2);

    // The driver's token computation (from our system tables' metadata)
    // agrees with the server's token() function.
    let state = session.get_cluster_state();
    let token = state.compute_token("ks", "events", &("a",)).expect("driver computes a token");
    let rows = session
        .query_unpaged("SELECT token(k) FROM ks.events WHERE k = 'a' LIMIT 1", &[])
        .await
        .expect("token")
        .into_rows_result()
        .expect("rows");
    let (server_token,): (i64,) = rows.single_row().expect("token row");
    assert_eq!(token.value(), server_token);
    assert!(
        state.get_keyspace("ks").is_some_and(|k| k.tables.contains_key("events")),
        "driver metadata shows the table"
    );
    assert_eq!(state.get_nodes_info().len(), 1);

    // Errors keep their kinds: an unknown table is Invalid, not a dropped connection.
    let err = session.query_unpaged("SELECT * FROM ks.nope", &[]).await.expect_err("unknown table");
    assert!(format!("{err}").contains("unconfigured table nope"), "{err}");
}
