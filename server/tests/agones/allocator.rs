//! The fleet directory under Agones (docs/spec/travel.md V13): the allocator client against a
//! fake allocator over mutual TLS ([`fake_allocator`](crate::fake_allocator)), the requests it
//! is sent read strictly against Agones' own `allocation.proto`.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_protocol::NodeId;
use gatehouse_server::fleet::{
    AgonesAllocator, AllocatorSettings, Candidate, DirectoryError, FleetDirectory,
};
use gatehouse_tests::within;
use prost_reflect::{DynamicMessage, Value};

use crate::fake_allocator::{Answer, FakeAllocator, Pki, message};

/// Settings to reach `fake` with `pki`'s client certificate, trusting `trusted`'s CA.
fn settings(fake: &FakeAllocator, pki: &Pki, trusted: &Pki) -> AllocatorSettings {
    AllocatorSettings {
        url: fake.url.clone(),
        namespace: "games".into(),
        labels: BTreeMap::from([("agones.dev/fleet".to_owned(), "crypt-fleet".to_owned())]),
        certificate: pki.client_cert.clone(),
        private_key: pki.client_key.clone(),
        ca: trusted.ca.clone(),
        timeout: Duration::from_millis(500),
        attempts: 3,
    }
}

/// The next candidate of `directory` for `seats` on the crypt, within a bound.
async fn ask(
    directory: &AgonesAllocator,
    seats: u32,
    asked: u32,
) -> Result<Option<Candidate>, DirectoryError> {
    let node = NodeId::new("crypt").unwrap();
    within(
        Duration::from_secs(10),
        "the allocator's answer",
        directory.candidate(&node, seats, asked),
    )
    .await
}

const ALLOCATED: Answer =
    Answer::Allocation { name: "crypt-fleet-x7k2p-4bq9z", address: "127.0.0.1", game_port: 7654 };

#[tokio::test]
async fn a_travel_allocates_with_the_shape_of_allocation_proto() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let fake = FakeAllocator::start(&pki, ALLOCATED).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();

    let candidate = ask(&directory, 12, 0).await.unwrap().unwrap();
    assert_eq!(candidate.server.as_str(), "crypt-fleet-x7k2p-4bq9z");
    assert_eq!(candidate.address, "127.0.0.1:7654", "the port named game");
    assert_eq!(candidate.certificate_sha256, None, "an allocation carries no annotation");

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/gameserverallocation"));
    assert_eq!(sent.content_type.as_deref(), Some("application/json"));
    // Strictly: a field allocation.proto does not have, or of the wrong type, fails here.
    let mut json = serde_json::Deserializer::from_slice(&sent.body);
    let request = DynamicMessage::deserialize(message("AllocationRequest"), &mut json)
        .unwrap_or_else(|e| panic!("not an AllocationRequest: {e}"));
    let field = |m: &DynamicMessage, name: &str| m.get_field_by_name(name).unwrap().into_owned();
    assert_eq!(field(&request, "namespace"), Value::String("games".into()));
    assert_eq!(field(&request, "scheduling"), Value::EnumNumber(0), "Packed");
    for unset in [
        "multiClusterSetting",
        "metadata",
        "requiredGameServerSelector",
        "preferredGameServerSelectors",
        "metaPatch",
    ] {
        assert!(!request.has_field_by_name(unset), "{unset} is set");
    }
    let Value::List(selectors) = field(&request, "gameServerSelectors") else { panic!() };
    let states: Vec<_> =
        selectors.iter().map(|s| field(s.as_message().unwrap(), "gameServerState")).collect();
    // ALLOCATED = 1 first, then READY = 0 (allocation.proto's numbers).
    assert_eq!(states, [Value::EnumNumber(1), Value::EnumNumber(0)]);
    for selector in &selectors {
        let selector = selector.as_message().unwrap();
        let labels = field(selector, "matchLabels");
        let labels = labels.as_map().unwrap();
        let label = |key: &str| labels.get(&prost_reflect::MapKey::String(key.into())).cloned();
        assert_eq!(label("gatehouse.dev/node"), Some(Value::String("crypt".into())));
        assert_eq!(label("agones.dev/fleet"), Some(Value::String("crypt-fleet".into())));
        assert_eq!(labels.len(), 2);
        let players = field(selector, "players");
        let players = players.as_message().unwrap();
        assert_eq!(field(players, "minAvailable"), Value::U64(12), "room for every seat");
        assert_eq!(field(players, "maxAvailable"), Value::U64(i64::MAX as u64));
    }
}

#[tokio::test]
async fn an_answer_above_64_kib_is_not_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let fake = FakeAllocator::start(&pki, Answer::Oversized(64 * 1024 + 1)).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    let DirectoryError::AllocatorUnreachable { why, .. } = &err else { panic!("{err}") };
    assert!(why.starts_with("reading the answer"), "{err}");
    // At the bound, the answer is read, and refused for what it is.
    let fake = FakeAllocator::start(&pki, Answer::Oversized(64 * 1024)).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    assert!(matches!(err, DirectoryError::AllocatorRefused { status: 200, .. }), "{err}");
}

#[tokio::test]
async fn an_allocator_shows_its_settings_not_its_private_key() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let fake = FakeAllocator::start(&pki, ALLOCATED).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let shown = format!("{directory:?}");
    assert!(shown.starts_with("AgonesAllocator { settings: AllocatorSettings {"), "{shown}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}

#[tokio::test]
async fn a_silent_allocator_fails_the_travel_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let fake = FakeAllocator::start(&pki, Answer::Silent).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    assert!(matches!(err, DirectoryError::AllocatorTimeout { ms: 500, .. }), "{err}");
    assert_eq!(fake.requests().len(), 1, "the request was read, never answered");
}

#[tokio::test]
async fn a_full_fleet_is_no_game_server_not_an_error_of_the_allocator() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let message = "there is no available GameServer to allocate";
    let full = Answer::Error { status: 429, code: 8, message };
    let fake = FakeAllocator::start(&pki, full).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    let DirectoryError::NoGameServer { node, message: said, .. } = &err else { panic!("{err}") };
    assert_eq!((node.as_str(), said.as_str()), ("crypt", message));

    let denied = Answer::Error { status: 403, code: 7, message: "permission denied" };
    let fake = FakeAllocator::start(&pki, denied).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    assert!(matches!(err, DirectoryError::AllocatorRefused { status: 403, .. }), "{err}");
    assert!(err.to_string().contains("permission denied"), "{err}");
}

#[tokio::test]
async fn an_allocator_the_ca_did_not_sign_is_not_trusted_nor_sent_anything() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let other = Pki::new(dir.path(), "other");
    let fake = FakeAllocator::start(&other, ALLOCATED).await;
    let directory = AgonesAllocator::new(settings(&fake, &pki, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    let DirectoryError::AllocatorUnreachable { why, .. } = &err else { panic!("{err}") };
    assert!(why.starts_with("TLS:"), "{err}");
    assert!(fake.requests().is_empty(), "nothing sent to an allocator not trusted");
}

#[tokio::test]
async fn a_client_certificate_the_allocator_does_not_trust_gets_no_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let other = Pki::new(dir.path(), "other");
    let fake = FakeAllocator::start(&pki, ALLOCATED).await;
    // Trusts the allocator, but presents a certificate of another CA.
    let directory = AgonesAllocator::new(settings(&fake, &other, &pki)).unwrap();
    let err = ask(&directory, 1, 0).await.unwrap_err();
    assert!(matches!(err, DirectoryError::AllocatorUnreachable { .. }), "{err}");
    assert!(fake.requests().is_empty(), "the allocator read no request");
}

#[tokio::test]
async fn a_travel_asks_the_allocator_at_most_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "fleet");
    let fake = FakeAllocator::start(&pki, ALLOCATED).await;
    let directory =
        AgonesAllocator::new(AllocatorSettings { attempts: 2, ..settings(&fake, &pki, &pki) })
            .unwrap();
    assert!(ask(&directory, 1, 0).await.unwrap().is_some());
    assert!(ask(&directory, 1, 1).await.unwrap().is_some());
    assert_eq!(ask(&directory, 1, 2).await.unwrap(), None, "a third is not asked");
    assert_eq!(fake.requests().len(), 2);
}
