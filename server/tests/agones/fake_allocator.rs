//! A fake Agones allocator service: `POST /gameserverallocation` over mutual TLS on 127.0.0.1,
//! on an ephemeral port. Its certificates come from a throwaway CA ([`Pki`]); it requires a
//! client certificate of that CA, as the allocator does. It records every request it reads and
//! answers as told ([`Answer`]): an allocation written by Agones' own `allocation.proto`
//! (through its descriptors, so in proto3 JSON as Agones writes it), an error status with a
//! gRPC gateway's body, or nothing at all.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Agones' `allocation.proto`, as descriptors (built by the package's build script).
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/allocation.bin"));

/// The descriptor of `allocation.<name>`.
pub(crate) fn message(name: &str) -> MessageDescriptor {
    let pool = DescriptorPool::decode(DESCRIPTORS).unwrap();
    pool.get_message_by_name(&format!("allocation.{name}")).unwrap()
}

/// A throwaway CA and, signed by it, a server certificate for 127.0.0.1 and a client
/// certificate, each written as PEM in `dir`.
pub(crate) struct Pki {
    /// The CA's certificate.
    pub(crate) ca: PathBuf,
    pub(crate) server_cert: PathBuf,
    pub(crate) server_key: PathBuf,
    pub(crate) client_cert: PathBuf,
    pub(crate) client_key: PathBuf,
}

impl Pki {
    /// A new CA named `name` and its two certificates, in `dir`.
    pub(crate) fn new(dir: &Path, name: &str) -> Self {
        let write = |file: &str, pem: String| {
            let path = dir.join(format!("{name}-{file}"));
            std::fs::write(&path, pem).unwrap();
            path
        };
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names).unwrap().signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
        let (client_cert, client_key) = leaf(vec!["gatehouse-fleet".into()]);
        Pki {
            ca: write("ca.pem", ca_cert.pem()),
            server_cert: write("server.pem", server_cert),
            server_key: write("server.key", server_key),
            client_cert: write("client.pem", client_cert),
            client_key: write("client.key", client_key),
        }
    }
}

/// How the fake answers each request.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// 200 with an `AllocationResponse` of this GameServer name, address and game port.
    Allocation { name: &'static str, address: &'static str, game_port: i32 },
    /// This status with a gRPC gateway's error body carrying `message`.
    Error { status: u16, code: i32, message: &'static str },
    /// Reads the request and never answers.
    Silent,
    /// 200 with a body of this many bytes (a JSON string).
    Oversized(usize),
}

/// One request the fake read.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Vec<u8>,
}

/// A running fake allocator; it stops when dropped.
pub(crate) struct FakeAllocator {
    /// `https://127.0.0.1:<port>`.
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAllocator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeAllocator {
    /// Serves `answer` with `pki`'s server certificate, trusting client certificates of
    /// `pki`'s CA only.
    pub(crate) async fn start(pki: &Pki, answer: Answer) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(&pki.ca).unwrap()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let chain = vec![CertificateDer::from_pem_file(&pki.server_cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&pki.server_key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let acceptor = acceptor.clone();
                let recorded = recorded.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    // A client this CA did not sign fails here, before any request is read.
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let recorded = recorded.clone();
                            let answer = answer.clone();
                            async move {
                                let method = request.method().to_string();
                                let path = request.uri().path().to_owned();
                                let content_type = request
                                    .headers()
                                    .get(hyper::header::CONTENT_TYPE)
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_owned);
                                let body = request.into_body().collect().await?.to_bytes().to_vec();
                                recorded.lock().unwrap().push(Recorded {
                                    method,
                                    path,
                                    content_type,
                                    body,
                                });
                                respond(&answer).await
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        FakeAllocator { url, requests, task }
    }

    /// The requests read so far, in order.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// The answer to one request.
async fn respond(answer: &Answer) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let (status, body) = match answer {
        Answer::Allocation { name, address, game_port } => {
            let port =
                |name: &str, number: i32| serde_json::json!({ "name": name, "port": number });
            let written = serde_json::json!({
                "gameServerName": name,
                "ports": [port("metrics", 9100), port("game", *game_port)],
                "address": address,
                "nodeName": "node-1",
                "source": "local",
            });
            // Through the descriptors and back: what Agones' proto3 JSON would say.
            let response =
                DynamicMessage::deserialize(message("AllocationResponse"), written).unwrap();
            (200, serde_json::to_vec(&response).unwrap())
        }
        Answer::Error { status, code, message } => {
            let body = serde_json::json!({ "code": code, "message": message, "details": [] });
            (*status, serde_json::to_vec(&body).unwrap())
        }
        Answer::Silent => std::future::pending().await,
        Answer::Oversized(bytes) => (200, format!("\"{}\"", "x".repeat(bytes - 2)).into_bytes()),
    };
    Ok(hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap())
}
