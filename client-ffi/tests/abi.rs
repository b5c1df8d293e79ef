//! The C ABI's edges, called as C calls them: NULLs and bad arguments are refused with a
//! status or a message, never followed.

#![allow(clippy::unwrap_used, clippy::undocumented_unsafe_blocks)]

use std::ffi::{CStr, CString, c_char};
use std::ptr;

use gatehouse_client_ffi::*;

#[test]
fn a_connect_with_a_bad_address_fails_with_a_message_naming_it() {
    let address = CString::new("not an address").unwrap();
    let name = CString::new("localhost").unwrap();
    let token = CString::new("t").unwrap();
    let certificate = b"-----BEGIN CERTIFICATE-----".to_vec();
    let options = GhConnectOptions {
        address: address.as_ptr(),
        server_name: name.as_ptr(),
        certificate: certificate.as_ptr(),
        certificate_len: certificate.len(),
        token: token.as_ptr(),
        connect_timeout_ms: 0,
    };
    let mut error = [0 as c_char; 64];
    let client = unsafe { gh_client_connect(&options, error.as_mut_ptr(), error.len()) };
    assert!(client.is_null());
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap();
    assert!(message.starts_with("address \"not an address\" is not a numeric IP"), "{message}");
    assert!(message.len() < 64, "cut to the buffer with its NUL");
}

#[test]
fn null_arguments_are_refused_not_followed() {
    let mut error = [0 as c_char; 32];
    assert!(unsafe { gh_client_connect(ptr::null(), error.as_mut_ptr(), error.len()) }.is_null());
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap();
    assert_eq!(message, "options is NULL");
    let load = GhLoad { kind: GhLoadKind::GhLoadJoin, id: 1 };
    let null = ptr::null_mut();
    assert_eq!(unsafe { gh_client_poll_event(null, ptr::null_mut()) }, -1);
    assert_eq!(unsafe { gh_client_levels_streamed(null, load) }, GhStatus::GhErrArgument);
    assert_eq!(unsafe { gh_client_request_restart(null) }, GhStatus::GhErrArgument);
    unsafe { gh_client_leave(null) };
    unsafe { gh_client_free(null) };
}

#[test]
fn a_minted_token_is_written_only_when_it_fits() {
    let key = CString::new("key").unwrap();
    let player = CString::new("c-0001").unwrap();
    let len = unsafe { gh_dev_mint_token(key.as_ptr(), player.as_ptr(), 60, ptr::null_mut(), 0) };
    assert!(len > 0);
    let mut small = vec![1 as c_char; len as usize];
    unsafe {
        gh_dev_mint_token(key.as_ptr(), player.as_ptr(), 60, small.as_mut_ptr(), small.len())
    };
    assert!(small.iter().all(|b| *b == 1), "no room for the NUL: nothing written");
    let mut fits = vec![1 as c_char; len as usize + 1];
    unsafe { gh_dev_mint_token(key.as_ptr(), player.as_ptr(), 60, fits.as_mut_ptr(), fits.len()) };
    let token = unsafe { CStr::from_ptr(fits.as_ptr()) }.to_str().unwrap();
    assert_eq!(token.len() as i64, len);
    assert_eq!(token.split('.').count(), 3, "a JWT");
    let bad = CString::new("not a player id!").unwrap();
    assert_eq!(
        unsafe { gh_dev_mint_token(key.as_ptr(), bad.as_ptr(), 60, ptr::null_mut(), 0) },
        -1
    );
}

/// The C constants are the protocol's wire values.
#[test]
fn the_c_constants_are_the_wire_values() {
    use gatehouse_protocol::{CloseCode, ErrorCode, RejectReason, TransitionFailure};
    let closes = [
        (GH_CLOSE_CODE_LEAVE, CloseCode::Leave),
        (GH_CLOSE_CODE_SHUTTING_DOWN, CloseCode::ShuttingDown),
        (GH_CLOSE_CODE_REJECTED, CloseCode::Rejected),
        (GH_CLOSE_CODE_PROTOCOL_VIOLATION, CloseCode::ProtocolViolation),
        (GH_CLOSE_CODE_SERVER_FULL, CloseCode::ServerFull),
        (GH_CLOSE_CODE_REPLACED, CloseCode::Replaced),
        (GH_CLOSE_CODE_READY_TIMEOUT, CloseCode::ReadyTimeout),
        (GH_CLOSE_CODE_SLOW_CONSUMER, CloseCode::SlowConsumer),
        (GH_CLOSE_CODE_HELLO_TIMEOUT, CloseCode::HelloTimeout),
        (GH_CLOSE_CODE_ABUSE, CloseCode::Abuse),
        (GH_CLOSE_CODE_WORLD_UNAVAILABLE, CloseCode::WorldUnavailable),
        (GH_CLOSE_CODE_TRAVELLED, CloseCode::Travelled),
        (GH_CLOSE_CODE_RECALLED, CloseCode::Recalled),
    ];
    for (c, code) in closes {
        assert_eq!(c, code.code(), "{code:?}");
    }
    let rejects = [
        (GH_REJECT_UNSUPPORTED_VERSION, RejectReason::UnsupportedVersion),
        (GH_REJECT_MISSING_TOKEN, RejectReason::MissingToken),
        (GH_REJECT_MALFORMED_TOKEN, RejectReason::MalformedToken),
        (GH_REJECT_BAD_SIGNATURE, RejectReason::BadSignature),
        (GH_REJECT_EXPIRED, RejectReason::Expired),
        (GH_REJECT_SERVER_FULL, RejectReason::ServerFull),
        (GH_REJECT_SHUTTING_DOWN, RejectReason::ShuttingDown),
        (GH_REJECT_HELLO_EXPECTED, RejectReason::HelloExpected),
        (GH_REJECT_TOKEN_LIFETIME, RejectReason::TokenLifetime),
        (GH_REJECT_TOO_MANY_LOGINS, RejectReason::TooManyLogins),
        (GH_REJECT_TICKET_USED, RejectReason::TicketUsed),
        (GH_REJECT_TICKET_STALE, RejectReason::TicketStale),
    ];
    for (c, reason) in rejects {
        assert_eq!(c, reason as u32, "{reason:?}");
    }
    let errors = [
        (GH_ERROR_UNEXPECTED_MESSAGE, ErrorCode::UnexpectedMessage),
        (GH_ERROR_UNKNOWN_TRANSITION, ErrorCode::UnknownTransition),
        (GH_ERROR_UNKNOWN_PAWN, ErrorCode::UnknownPawn),
        (GH_ERROR_RESTART_REJECTED, ErrorCode::RestartRejected),
        (GH_ERROR_RATE_LIMITED, ErrorCode::RateLimited),
        (GH_ERROR_UNKNOWN_JOIN, ErrorCode::UnknownJoin),
    ];
    for (c, code) in errors {
        assert_eq!(c, code as u32, "{code:?}");
    }
    let failures = [
        (GH_TRANSITION_FAILURE_TIMED_OUT, TransitionFailure::TimedOut),
        (GH_TRANSITION_FAILURE_DESTINATION_UNAVAILABLE, TransitionFailure::DestinationUnavailable),
        (GH_TRANSITION_FAILURE_DESTINATION_LOST, TransitionFailure::DestinationLost),
    ];
    for (c, reason) in failures {
        assert_eq!(c, reason as u32, "{reason:?}");
    }
}

/// `gh_client_connect_pinned` with a malformed fingerprint fails before dialling, naming the
/// problem; the certificate may be NULL when pinned (docs/client.md, "Pinning the server's
/// certificate").
#[test]
fn a_malformed_fingerprint_is_refused_naming_the_problem() {
    let address = CString::new("127.0.0.1:9").unwrap();
    let name = CString::new("localhost").unwrap();
    let token = CString::new("t").unwrap();
    let options = GhConnectOptions {
        address: address.as_ptr(),
        server_name: name.as_ptr(),
        certificate: ptr::null(),
        certificate_len: 0,
        token: token.as_ptr(),
        connect_timeout_ms: 0,
    };
    let fingerprint = CString::new("AB:CD:EX").unwrap();
    let mut error = [0 as c_char; 256];
    let client = unsafe {
        gh_client_connect_pinned(&options, fingerprint.as_ptr(), error.as_mut_ptr(), error.len())
    };
    assert!(client.is_null());
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap();
    assert!(message.starts_with("fingerprint: "), "{message}");
    assert!(message.contains("'X' at position 8"), "{message}");
    // Without a fingerprint the certificate is required, as gh_client_connect's.
    let client =
        unsafe { gh_client_connect_pinned(&options, ptr::null(), error.as_mut_ptr(), error.len()) };
    assert!(client.is_null());
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap();
    assert_eq!(message, "certificate is NULL");
}

/// A C client given the server's fingerprint and no certificate is welcomed; one given another
/// fingerprint is refused with a message saying the certificate does not match the pin.
#[test]
fn a_pinned_c_client_connects_only_to_the_server_whose_certificate_matches() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server =
        runtime.block_on(gatehouse_tests::TestServer::start(gatehouse_tests::worlds::QUICK));
    let der = std::fs::read(&server.cert).unwrap();
    let pin = gatehouse_client::CertificatePin::of_certificate(&der).to_string();
    let address = CString::new(server.addr.to_string()).unwrap();
    let name = CString::new("localhost").unwrap();
    let mut minted = [0 as c_char; 512];
    let key = CString::new(gatehouse_protocol::token::DEV_TOKEN_KEY).unwrap();
    let player = CString::new("c-pin-0001").unwrap();
    let len = unsafe {
        gh_dev_mint_token(key.as_ptr(), player.as_ptr(), 600, minted.as_mut_ptr(), minted.len())
    };
    assert!(len > 0 && (len as usize) < minted.len());
    let options = GhConnectOptions {
        address: address.as_ptr(),
        server_name: name.as_ptr(),
        certificate: ptr::null(),
        certificate_len: 0,
        token: minted.as_ptr(),
        connect_timeout_ms: 5000,
    };
    let mut error = [0 as c_char; 512];

    let wrong = CString::new("00".repeat(32)).unwrap();
    let client = unsafe {
        gh_client_connect_pinned(&options, wrong.as_ptr(), error.as_mut_ptr(), error.len())
    };
    assert!(client.is_null());
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap();
    assert!(message.contains("does not match the pin"), "{message}");

    let fingerprint = CString::new(pin).unwrap();
    let client = unsafe {
        gh_client_connect_pinned(&options, fingerprint.as_ptr(), error.as_mut_ptr(), error.len())
    };
    let message = unsafe { CStr::from_ptr(error.as_ptr()) }.to_str().unwrap_or_default();
    assert!(!client.is_null(), "{message}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut welcomed = false;
    while !welcomed && std::time::Instant::now() < deadline {
        let mut event = std::mem::MaybeUninit::<GhEvent>::uninit();
        match unsafe { gh_client_poll_event(client, event.as_mut_ptr()) } {
            1 => welcomed = unsafe { event.assume_init() }.kind == GhEventKind::GhEventWelcomed,
            0 => std::thread::sleep(std::time::Duration::from_millis(10)),
            _ => break,
        }
    }
    assert!(welcomed, "no GH_EVENT_WELCOMED within 10 s");
    unsafe { gh_client_leave(client) };
    unsafe { gh_client_free(client) };
    runtime.block_on(server.stop());
}
