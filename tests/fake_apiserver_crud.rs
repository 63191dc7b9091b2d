//! Faithfulness tests for the fake API server (tests/support/fake_apiserver.rs) through the real kube client:
//! CRUD, patches, the status subresource and optimistic concurrency.

#[path = "support/fake_apiserver.rs"]
mod fake_apiserver;

use fake_apiserver::FakeApiServer;

#[tokio::test]
async fn the_fake_starts() {
    let server = FakeApiServer::start().await;
    let client = server.client().await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.minor, "35");
}
