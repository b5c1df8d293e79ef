//! Store URLs (`store.url`): which backend and where, parsed once; shown only with any password
//! redacted.
//!
//! Owns the URL grammar and the redaction. Opens nothing: `crate::store::Store::open` does.
//! A PostgreSQL URL's file parameters (`sslrootcert`, `sslcert`, `sslkey`) are resolved
//! against the data dir, as a SQLite path is, and checked when the store is opened
//! (docs/operations.md, "PostgreSQL over TLS").

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

/// Why a store URL was refused: the URL, password redacted, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid store url {url}: {why}")]
pub struct StoreUrlError {
    /// The URL, password redacted.
    pub url: String,
    /// What was expected and what was found.
    pub why: String,
}

/// The default `store.url`: the embedded store, file `saves.db` in the data dir.
pub const DEFAULT_STORE_URL: &str = "sqlite:saves.db";

/// Where player saves live: the embedded store (a SQLite file, `sqlite:PATH`, relative paths
/// resolved against the data dir) or a PostgreSQL server (`postgres://USER:PASSWORD@HOST/DB`,
/// with `sslmode` and `sslrootcert` for TLS; a relative `sslrootcert` is in the data dir too).
///
/// `Display` and `Debug` never show a password.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl(Target);

#[derive(Clone, PartialEq, Eq)]
enum Target {
    /// `sqlite:PATH` or `sqlite://PATH`.
    Embedded(PathBuf),
    /// `postgres://…` or `postgresql://…`, as given (with its password).
    Postgres(String),
}

/// A [`StoreUrl`] resolved against the data dir: what `crate::store::Store::open` connects to.
pub(crate) enum Resolved {
    /// The SQLite file.
    Embedded(PathBuf),
    /// The PostgreSQL connect options.
    Postgres(Box<PgConnectOptions>),
}

impl StoreUrl {
    /// Parses a store URL.
    ///
    /// # Errors
    /// [`StoreUrlError`] (naming the URL without its password) for an unknown scheme,
    /// an empty or in-memory SQLite path, SQLite query parameters, an unknown `sslmode`, an
    /// empty file parameter (`sslrootcert=`), or a PostgreSQL URL its driver refuses.
    pub fn parse(url: &str) -> Result<StoreUrl, StoreUrlError> {
        let invalid = |why: String| StoreUrlError { url: redact(url), why };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("expected a file path after `sqlite:`, found none".into()));
            }
            if path.contains('?') {
                return Err(invalid(
                    "expected a plain file path, found query parameters (the embedded store sets its own)"
                        .into(),
                ));
            }
            if path == ":memory:" || path.starts_with("file::memory:") {
                return Err(invalid(
                    "expected a file path, found an in-memory database (it would lose every save)"
                        .into(),
                ));
            }
            return Ok(StoreUrl(Target::Embedded(PathBuf::from(path))));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            check_postgres_parameters(url).map_err(invalid)?;
            PgConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
            return Ok(StoreUrl(Target::Postgres(url.to_owned())));
        }
        Err(invalid("expected `sqlite:PATH` (the embedded store) or `postgres://…`".into()))
    }

    /// Whether this is the embedded store (a file in the data dir) rather than a server.
    pub fn is_embedded(&self) -> bool {
        matches!(self.0, Target::Embedded(_))
    }

    /// The embedded store's file, resolved against `data_dir`; `None` for PostgreSQL.
    pub fn embedded_path(&self, data_dir: &Path) -> Option<PathBuf> {
        match &self.0 {
            Target::Embedded(path) => Some(data_dir.join(path)),
            Target::Postgres(_) => None,
        }
    }

    /// This URL with a relative SQLite path resolved against `data_dir`, password redacted:
    /// how logs and errors name the store.
    pub fn describe(&self, data_dir: &Path) -> String {
        match &self.0 {
            Target::Embedded(path) => format!("sqlite:{}", data_dir.join(path).display()),
            Target::Postgres(url) => redact(url),
        }
    }

    /// Reads the files a PostgreSQL URL names (`sslrootcert`, `sslcert`, `sslkey`), resolved
    /// against `data_dir`, as opening the store does ([`Self::resolve`]), without connecting:
    /// what `config check` runs. Nothing to read for the embedded store.
    ///
    /// # Errors
    /// [`StoreUrlError`] naming the parameter and the file: missing, unreadable, or a CA file
    /// with no PEM certificate.
    pub fn check_files(&self, data_dir: &Path) -> Result<(), StoreUrlError> {
        self.resolve(data_dir).map(|_| ())
    }

    /// What to connect to. A PostgreSQL URL's file parameters are resolved against `data_dir`
    /// and each file is read once here, so a missing or unreadable one is an error naming the
    /// parameter and the file (the driver reads them again for each connection).
    pub(crate) fn resolve(&self, data_dir: &Path) -> Result<Resolved, StoreUrlError> {
        match &self.0 {
            Target::Embedded(path) => Ok(Resolved::Embedded(data_dir.join(path))),
            Target::Postgres(url) => {
                let invalid = |why: String| StoreUrlError { url: redact(url), why };
                let mut options =
                    PgConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
                for file in file_parameters(url, data_dir) {
                    file.check().map_err(invalid)?;
                    options = match file.kind {
                        FileKind::RootCert => options.ssl_root_cert(&file.path),
                        FileKind::ClientCert => options.ssl_client_cert(&file.path),
                        FileKind::ClientKey => options.ssl_client_key(&file.path),
                    };
                }
                Ok(Resolved::Postgres(Box::new(options)))
            }
        }
    }
}

/// The `sslmode` values PostgreSQL's driver knows.
const SSL_MODES: [&str; 6] = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

/// What a file parameter of a PostgreSQL URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// The CA certificates that verify the server (`sslrootcert`).
    RootCert,
    /// The client's certificate (`sslcert`).
    ClientCert,
    /// The client certificate's private key (`sslkey`).
    ClientKey,
}

impl FileKind {
    /// The kind a URL parameter names, under each spelling the driver accepts.
    fn of(key: &str) -> Option<FileKind> {
        match key {
            "sslrootcert" | "ssl-root-cert" | "ssl-ca" => Some(FileKind::RootCert),
            "sslcert" | "ssl-cert" => Some(FileKind::ClientCert),
            "sslkey" | "ssl-key" => Some(FileKind::ClientKey),
            _ => None,
        }
    }

    fn what(self) -> &'static str {
        match self {
            FileKind::RootCert => "CA file",
            FileKind::ClientCert => "client certificate file",
            FileKind::ClientKey => "client key file",
        }
    }
}

/// A file a PostgreSQL URL names, resolved against the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileParameter {
    /// The parameter as spelled in the URL, e.g. `sslrootcert`.
    key: String,
    kind: FileKind,
    /// The file, absolute when the data dir is.
    path: PathBuf,
}

impl FileParameter {
    /// Reads the file: it must exist and be readable, and a CA file must hold at least one
    /// PEM certificate. The error names the parameter and the file.
    fn check(&self) -> Result<(), String> {
        let FileParameter { key, kind, path } = self;
        let what = kind.what();
        let data = std::fs::read(path).map_err(|e| {
            format!(
                "`{key}`: cannot read the {what} {}: {e} (a relative path is in the data dir)",
                path.display()
            )
        })?;
        if *kind == FileKind::RootCert {
            use rustls::pki_types::{CertificateDer, pem::PemObject as _};
            let certificates = CertificateDer::pem_slice_iter(&data).collect::<Result<Vec<_>, _>>();
            match certificates {
                Ok(certificates) if !certificates.is_empty() => {}
                Ok(_) => {
                    return Err(format!(
                        "`{key}`: expected PEM certificates (-----BEGIN CERTIFICATE-----) in the {what} {}, found none",
                        path.display()
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "`{key}`: expected PEM certificates in the {what} {}, found an unreadable one: {e}",
                        path.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The URL's query parameters, decoded; none when it is not a URL (the driver says why).
fn query_pairs(url: &str) -> Vec<(String, String)> {
    match url::Url::parse(url) {
        Ok(parsed) => parsed.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect(),
        Err(_) => Vec::new(),
    }
}

/// Refuses what the driver would take without a clear word: an unknown `sslmode`, and a file
/// parameter with no file.
fn check_postgres_parameters(url: &str) -> Result<(), String> {
    for (key, value) in query_pairs(url) {
        if (key == "sslmode" || key == "ssl-mode") && !SSL_MODES.contains(&value.as_str()) {
            return Err(format!(
                "expected `{key}` to be one of {}, found {value:?}",
                SSL_MODES.join(", ")
            ));
        }
        if let Some(kind) = FileKind::of(&key)
            && value.is_empty()
        {
            return Err(format!(
                "expected a path to the {} after `{key}=`, found none",
                kind.what()
            ));
        }
    }
    Ok(())
}

/// The files the URL names, each kind once (the last spelling wins, as in the driver), a
/// relative path resolved against `data_dir`.
fn file_parameters(url: &str, data_dir: &Path) -> Vec<FileParameter> {
    let mut files: Vec<FileParameter> = Vec::new();
    for (key, value) in query_pairs(url) {
        let Some(kind) = FileKind::of(&key) else { continue };
        files.retain(|file| file.kind != kind);
        files.push(FileParameter { key, kind, path: data_dir.join(value) });
    }
    files
}

impl Default for StoreUrl {
    fn default() -> Self {
        StoreUrl(Target::Embedded(PathBuf::from("saves.db")))
    }
}

impl FromStr for StoreUrl {
    type Err = StoreUrlError;
    fn from_str(url: &str) -> Result<Self, StoreUrlError> {
        StoreUrl::parse(url)
    }
}

impl TryFrom<String> for StoreUrl {
    type Error = StoreUrlError;
    fn try_from(url: String) -> Result<Self, StoreUrlError> {
        StoreUrl::parse(&url)
    }
}

impl<'de> serde::Deserialize<'de> for StoreUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let url = String::deserialize(d)?;
        StoreUrl::parse(&url).map_err(serde::de::Error::custom)
    }
}

/// Serialises as [`Display`](fmt::Display) shows it: any password redacted (`config show`).
impl serde::Serialize for StoreUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Target::Embedded(path) => write!(f, "sqlite:{}", path.display()),
            Target::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// `url` with the password replaced by `***`, wherever a connection URL can carry one: the
/// user-info part (`user:PASSWORD@host`) and a `password=` query parameter.
pub fn redact(url: &str) -> String {
    const MASK: &str = "***";
    let mut out = String::with_capacity(url.len());
    match url.split_once("://") {
        // The userinfo ends at the last `@`: a password typed with a `/`, `?` or `#` in it (not
        // percent-encoded) must not end it early. An `@` in the query masks more than needed,
        // never less.
        Some((scheme, rest)) => {
            out.push_str(scheme);
            out.push_str("://");
            let tail = match rest.rsplit_once('@') {
                Some((userinfo, tail)) => {
                    match userinfo.split_once(':') {
                        Some((user, _password)) => {
                            out.push_str(user);
                            out.push(':');
                            out.push_str(MASK);
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push('@');
                    tail
                }
                None => rest,
            };
            push_masking_query(&mut out, tail, MASK);
        }
        // Not a URL we can read (`postgres:/user:pw@host`, `user:pw`): an embedded path is
        // shown, anything else is masked from its first `:` up to its last `@` (or to the end),
        // so a mistyped scheme never prints a password.
        None if url.starts_with("sqlite:") => push_masking_query(&mut out, url, MASK),
        None => match url.split_once(':') {
            Some((head, rest)) => {
                out.push_str(head);
                out.push(':');
                out.push_str(MASK);
                if let Some((_, host)) = rest.rsplit_once('@') {
                    out.push('@');
                    push_masking_query(&mut out, host, MASK);
                }
            }
            None => out.push_str(url),
        },
    }
    out
}

/// Writes `text` to `out` with the value of every `password` and `sslpassword` query
/// parameter masked.
fn push_masking_query(out: &mut String, text: &str, mask: &str) {
    let Some((head, query)) = text.split_once('?') else {
        out.push_str(text);
        return;
    };
    out.push_str(head);
    out.push('?');
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _))
                if key.eq_ignore_ascii_case("password")
                    || key.eq_ignore_ascii_case("sslpassword") =>
            {
                format!("{key}={mask}")
            }
            _ => pair.to_owned(),
        })
        .collect();
    out.push_str(&pairs.join("&"));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password typed with a `/`, `?`, `#` or `@` in it (not percent-encoded) is masked
    /// whole, and so is an `sslpassword` parameter.
    #[test]
    fn a_password_with_a_slash_question_mark_or_hash_is_never_shown() {
        for (url, shown) in [
            ("postgres://gate:se/cret1@127.0.0.1/db", "postgres://gate:***@127.0.0.1/db"),
            ("postgres://gate:se?cret2@127.0.0.1/db", "postgres://gate:***@127.0.0.1/db"),
            ("postgres://gate:se#cret3@127.0.0.1/db", "postgres://gate:***@127.0.0.1/db"),
            ("postgres://gate:se@cret4@127.0.0.1/db?x=1", "postgres://gate:***@127.0.0.1/db?x=1"),
            (
                "postgres://gate@h/db?sslmode=verify-full&sslpassword=cret5",
                "postgres://gate@h/db?sslmode=verify-full&sslpassword=***",
            ),
        ] {
            assert_eq!(redact(url), shown);
        }
    }

    /// A mistyped scheme is no reason to print the password.
    #[test]
    fn a_url_that_does_not_parse_never_shows_its_password() {
        for url in [
            "postgres:/alice:hunter2pass@localhost/db",
            "postgres//alice:hunter2pass@localhost/db",
            "alice:hunter2pass",
            "postgres:alice:hunter2pass@h/db",
        ] {
            let shown = redact(url);
            assert!(!shown.contains("hunter2pass"), "{url} -> {shown}");
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(!err.contains("hunter2pass"), "{err}");
        }
        assert_eq!(redact("sqlite:saves.db"), "sqlite:saves.db");
        assert_eq!(redact("postgres:/alice:pw@localhost/db"), "postgres:***@localhost/db");
    }

    #[test]
    fn the_default_is_saves_db_in_the_data_dir() {
        let url = StoreUrl::parse(DEFAULT_STORE_URL).unwrap();
        assert_eq!(url, StoreUrl::default());
        assert!(url.is_embedded());
        assert_eq!(url.embedded_path(Path::new("data")), Some(PathBuf::from("data/saves.db")));
        assert_eq!(url.describe(Path::new("data")), "sqlite:data/saves.db");
    }

    #[test]
    fn sqlite_urls_accept_both_spellings_and_absolute_paths() {
        let rel = StoreUrl::parse("sqlite://x/saves.db").unwrap();
        assert_eq!(rel.embedded_path(Path::new("/d")), Some(PathBuf::from("/d/x/saves.db")));
        let abs = StoreUrl::parse("sqlite:///var/lib/g/saves.db").unwrap();
        assert_eq!(abs.embedded_path(Path::new("/d")), Some(PathBuf::from("/var/lib/g/saves.db")));
    }

    #[test]
    fn unusable_urls_are_refused_with_a_reason() {
        for (url, why) in [
            ("sqlite:", "found none"),
            ("sqlite::memory:", "in-memory"),
            ("sqlite:saves.db?mode=ro", "query parameters"),
            ("mysql://u:p@h/db", "expected `sqlite:PATH`"),
            ("postgres://u:secret@h:notaport/db", "port"),
        ] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
            assert!(!err.contains("secret"), "{url}: {err}");
        }
    }

    #[test]
    fn postgres_tls_parameters_are_accepted() {
        for mode in SSL_MODES {
            let url = format!("postgres://u:pw@db.example.com/saves?sslmode={mode}");
            StoreUrl::parse(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
        let url = "postgres://u:pw@db.example.com/saves?sslmode=verify-full&sslrootcert=ca.pem";
        assert_eq!(
            StoreUrl::parse(url).unwrap().to_string(),
            "postgres://u:***@db.example.com/saves?sslmode=verify-full&sslrootcert=ca.pem"
        );
    }

    #[test]
    fn unusable_tls_parameters_are_refused_naming_the_key() {
        for (url, why) in [
            ("postgres://u:secret@h/db?sslmode=verify_full", "expected `sslmode` to be one of"),
            ("postgres://u:secret@h/db?sslmode=verify-full&sslrootcert=", "`sslrootcert=`"),
            ("postgres://u:secret@h/db?ssl-ca=", "the CA file after `ssl-ca=`"),
        ] {
            let err = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
            assert!(!err.contains("secret"), "{url}: {err}");
        }
    }

    #[test]
    fn file_parameters_are_resolved_against_the_data_dir_the_last_spelling_winning() {
        let url = "postgres://h/db?sslrootcert=first.pem&ssl-ca=certs/ca.pem&sslcert=%2Fetc%2Fc.pem\
                   &sslkey=k.pem&sslmode=verify-full";
        let files = file_parameters(url, Path::new("/data"));
        let found: Vec<(&str, FileKind, &Path)> =
            files.iter().map(|f| (f.key.as_str(), f.kind, f.path.as_path())).collect();
        assert_eq!(
            found,
            [
                ("ssl-ca", FileKind::RootCert, Path::new("/data/certs/ca.pem")),
                ("sslcert", FileKind::ClientCert, Path::new("/etc/c.pem")),
                ("sslkey", FileKind::ClientKey, Path::new("/data/k.pem")),
            ]
        );
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_refused_naming_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("empty.pem"), "not a certificate\n").unwrap();
        std::fs::create_dir(dir.path().join("a-dir.pem")).unwrap();
        for (name, why) in [
            ("missing.pem", "cannot read the CA file"),
            ("empty.pem", "expected PEM certificates"),
            ("a-dir.pem", "cannot read the CA file"),
        ] {
            let url = StoreUrl::parse(&format!(
                "postgres://u:secret@h/db?sslmode=verify-full&sslrootcert={name}"
            ))
            .unwrap();
            let Err(err) = url.resolve(dir.path()) else { panic!("{name} was accepted") };
            let err = err.to_string();
            assert!(err.contains("`sslrootcert`"), "{name}: {err}");
            assert!(err.contains(&dir.path().join(name).display().to_string()), "{name}: {err}");
            assert!(err.contains(why), "{name}: {err}");
            assert!(!err.contains("secret"), "{name}: {err}");
        }
    }

    #[test]
    fn passwords_never_show() {
        let url = StoreUrl::parse("postgres://gate:hunter2@db.internal:5432/saves").unwrap();
        assert_eq!(url.to_string(), "postgres://gate:***@db.internal:5432/saves");
        assert!(!format!("{url:?}").contains("hunter2"));
        assert_eq!(
            redact("postgresql://u@h/db?sslmode=disable&password=x&user=u"),
            "postgresql://u@h/db?sslmode=disable&password=***&user=u"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("sqlite:saves.db"), "sqlite:saves.db");
    }
}
