//! The admin endpoint's settings that are not plain values: its bearer token and the bounds on
//! its connections (`[admin]`). The endpoint itself is `crate::admin`.

use std::time::Duration;

/// The bearer token that routes changing the game (`POST /travel`) require: `admin.token` in
/// the config file, or `GATEHOUSE_ADMIN_TOKEN` (never a command-line flag, which other users
/// can read). At least [`AdminToken::MIN_LEN`] printable ASCII characters; `Debug` never shows
/// it.
///
/// Read from the config file as it is and checked by [`AdminToken::check`] with the other keys,
/// so a refused token is never quoted back in a parse error.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct AdminToken(String);

/// Serialises as `<redacted>`: a serialised config never carries the token (`config show`).
impl serde::Serialize for AdminToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::REDACTED)
    }
}

impl AdminToken {
    /// The shortest token accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A checked token (see [`AdminToken::check`]).
    ///
    /// # Errors
    /// What is wrong with it, without quoting it.
    pub fn parse(token: &str) -> Result<AdminToken, String> {
        let token = AdminToken(token.to_owned());
        token.check()?;
        Ok(token)
    }

    /// Checks the token: at least [`Self::MIN_LEN`] bytes, printable ASCII without spaces (it
    /// travels in an HTTP header).
    ///
    /// # Errors
    /// What is wrong with it, without quoting it.
    pub fn check(&self) -> Result<(), String> {
        if self.0.len() < Self::MIN_LEN {
            return Err(format!(
                "must be at least {} bytes long, found {}",
                Self::MIN_LEN,
                self.0.len()
            ));
        }
        if !self.0.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be printable ASCII without spaces".into());
        }
        Ok(())
    }

    /// The token as an `Authorization: Bearer` value needs it (for `gatehouse-server probe`).
    pub fn bearer(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub(crate) fn accepts(&self, presented: &[u8]) -> bool {
        use sha2::Digest as _;
        // Comparing digests hides the token's length and where a guess goes wrong.
        let want = sha2::Sha256::digest(self.0.as_bytes());
        let got = sha2::Sha256::digest(presented);
        want.iter().zip(got.iter()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// The bounds on the admin endpoint's connections (`[admin]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `max_connections`: open connections at once, beyond the few the admin endpoint keeps for
    /// loopback (`admin::LOOPBACK_RESERVE`).
    pub max_connections: usize,
    /// `header_timeout_ms`: the bound on a request head, and on an idle keep-alive connection.
    pub header_timeout: Duration,
    /// `connection_timeout_ms`: the bound on a whole connection.
    pub connection_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(30),
        }
    }
}
