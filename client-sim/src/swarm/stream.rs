//! One link's control stream: reading server messages into the session (with when each became
//! readable, what a reply is timed from); and what one wake of the session asks of its links,
//! each run of messages for one link framed as one chunk ([`Turn`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};

use gatehouse_client::{Dial, LinkId, Output};
use gatehouse_protocol::codec::{decode_replicated_kept, is_replicated, is_world_snapshot};
use gatehouse_protocol::{ClientMessage, FrameDecoder, ServerMessage, decode_body};
use tokio::time::Instant;

use super::READ_CHUNK;
use crate::session::ClientSession;

/// The read side of a link's control stream: its decoder, and when its data became readable.
pub(super) struct Inbound {
    /// The session's link this stream is.
    link: LinkId,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
    /// When the life dialled: connect → `Welcome` is timed from it.
    dialled: Instant,
    /// Connect → `Welcome` was timed, or is not timed on this link (a move's destination).
    welcomed: bool,
    /// When the QUIC driver last found the stream readable: what a reply is timed from.
    readable: Arc<ReadStamp>,
    /// After a full chunk more may wait in the stream, readable since the same wake: the next
    /// read's cause unless a newer wake stamps it.
    carried: Option<std::time::Instant>,
}

/// What one read of the control stream came to.
pub(super) enum Read {
    /// Messages were read and handed to the session; its replies answer what became readable
    /// at `since`.
    Messages { since: std::time::Instant },
    /// The stream ended or failed, or the server sent a frame that does not decode (the error).
    Closed(Option<String>),
}

impl Inbound {
    /// The read side of `recv`, link `link` of its session, decoding with `decoder`, for a life
    /// that dialled at `dialled`; `timed`: the session's first link, whose connect → `Welcome`
    /// is timed (a move's destination welcomes a client already playing).
    pub(super) fn new(
        link: LinkId,
        recv: quinn::RecvStream,
        decoder: FrameDecoder,
        dialled: Instant,
        timed: bool,
    ) -> Inbound {
        Inbound {
            link,
            recv,
            decoder,
            dialled,
            welcomed: !timed,
            readable: Arc::new(ReadStamp::default()),
            carried: None,
        }
    }

    /// The next chunk of the stream; `None` once it ended or failed. Cancel-safe.
    pub(super) async fn next_chunk(&mut self) -> Option<bytes::Bytes> {
        match stamped(self.recv.read_chunk(READ_CHUNK, true), &self.readable).await {
            Ok(Some(chunk)) => Some(chunk.bytes),
            Ok(None) | Err(_) => None,
        }
    }

    /// Hands every whole message `chunk` completes to `session`, as arrived on this link;
    /// `None` (the stream ended or failed) is its close.
    pub(super) fn feed(
        &mut self,
        session: &mut ClientSession,
        chunk: Option<bytes::Bytes>,
    ) -> Read {
        let Some(chunk) = chunk else { return Read::Closed(None) };
        // One clock read per chunk, not per message: the messages of a chunk arrived together,
        // and with thousands of clients a read per message shows in the sessions' thread.
        let now = Instant::now();
        let since = self.readable.take().or(self.carried.take());
        let since = since.unwrap_or(now.into_std());
        if chunk.len() == READ_CHUNK {
            self.carried = Some(since);
        }
        self.decoder.extend(&chunk);
        loop {
            let message = match self.decoder.next_body() {
                Ok(Some(body)) => read_message(body, session),
                Ok(None) => return Read::Messages { since },
                Err(e) => Err(e),
            };
            match message {
                Ok(Some(message)) => self.handle(session, message, now),
                Ok(None) => {}
                Err(e) => return Read::Closed(Some(format!("bad frame from the server: {e}"))),
            }
        }
    }

    /// Hands `message`, read at `now`, to `session`; times connect → `Welcome` at the welcome.
    fn handle(&mut self, session: &mut ClientSession, message: ServerMessage, now: Instant) {
        if let ServerMessage::Welcome { max_frame_len, .. } = &message {
            // The server's limit, both ways (docs/protocol.md 2).
            self.decoder.set_max_len(*max_frame_len as usize);
        }
        session.handle_on(now.into_std(), self.link, message);
        if !self.welcomed && session.player().is_some() {
            self.welcomed = true;
            session.record_connect_to_welcome(now - self.dialled);
        }
    }
}

/// The message in `body` as `session` needs it. A thin session keeps no world of the others
/// (docs/simulator.md), so it reads in place what it would drop: a `WorldSnapshot` is skipped
/// (the own player's state after a login comes in the replicated changes that follow), and of
/// a `Replicated` only the changes about its own player, or naming pawns only (deaths,
/// destructions, teleports), are decoded. At 4,000 clients the swarm otherwise spends most of
/// its time making the others' names; the server's bytes are the same either way. `None`:
/// nothing for the session.
fn read_message(
    body: &[u8],
    session: &ClientSession,
) -> Result<Option<ServerMessage>, gatehouse_protocol::FrameError> {
    let me = session.player().filter(|_| !session.is_full());
    match me {
        Some(_) if is_world_snapshot(body) => Ok(None),
        Some(me) if is_replicated(body) => {
            let me = me.as_str();
            let changes = decode_replicated_kept(body, |c| c.player().is_none_or(|p| p == me))?;
            Ok((!changes.is_empty()).then_some(ServerMessage::Replicated { changes }))
        }
        _ => decode_body(body).map(Some),
    }
}

/// Sleeps until `deadline`, or forever without one.
pub(super) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What one wake of a session asks of its links ([`wake_turn`]).
pub(super) struct Turn {
    /// What the session asked, in order: each run of messages for one link framed as one chunk.
    pub(super) actions: Vec<LinkAction>,
    /// Whether one of the messages answers the server (`TransitionShown`, `TransitionReady`,
    /// `JoinReady`, `PossessionAcknowledged`): a reply, timed from its cause.
    pub(super) answers: bool,
    /// The deadline handled first, if one was due.
    pub(super) due: Option<std::time::Instant>,
}

/// One thing a session asks of its links (its [`Output`]s, messages framed).
#[derive(Debug)]
pub(super) enum LinkAction {
    /// Write these frames, back to back, on `link`.
    Write {
        /// The link.
        link: LinkId,
        /// The frames.
        chunk: Vec<u8>,
    },
    /// Open `link` to a move's destination (docs/spec/travel.md V3).
    Dial {
        /// The link.
        link: LinkId,
        /// Where to.
        dial: Dial,
    },
    /// Close `link`, after what was written on it.
    Close {
        /// The link.
        link: LinkId,
    },
}

/// Takes every output `session` has now into `actions`, each message framed within `max` bytes
/// (one that cannot be is dropped and logged) and appended to the chunk for its link when the
/// action before is that link's write. Returns whether a message answers the server
/// ([`is_answer`]).
pub(super) fn take_actions(
    session: &mut ClientSession,
    max: usize,
    actions: &mut Vec<LinkAction>,
) -> bool {
    let mut answers = false;
    while let Some(output) = session.poll_output() {
        match output {
            Output::Send { link, message } => {
                answers |= is_answer(&message);
                if !matches!(actions.last(), Some(LinkAction::Write { link: last, .. }) if *last == link)
                {
                    actions.push(LinkAction::Write { link, chunk: Vec::new() });
                }
                if let Some(LinkAction::Write { chunk, .. }) = actions.last_mut()
                    && let Err(e) = gatehouse_protocol::encode_frame_into(&message, max, chunk)
                {
                    tracing::warn!(error = %e, "a message of the session could not be framed; not sent");
                }
            }
            Output::Dial { link, dial } => actions.push(LinkAction::Dial { link, dial }),
            Output::Close { link } => actions.push(LinkAction::Close { link }),
            // A newer output this swarm does not know: nothing to do with it.
            _ => {}
        }
    }
    answers
}

/// What one wake of a session asks of its links: first the deadlines already due at `now` are
/// handled (a zero-length stream's ready), then every output is taken ([`take_actions`]). So a
/// client ready at once answers a `ShowTransition` with one datagram, as the server writes one
/// chunk per wake (fewer datagrams to read).
pub(super) fn wake_turn(session: &mut ClientSession, now: std::time::Instant, max: usize) -> Turn {
    let due = session.poll_timeout().filter(|at| *at <= now);
    if due.is_some() {
        session.handle_timeout(now);
    }
    let mut actions = Vec::new();
    let answers = take_actions(session, max, &mut actions);
    Turn { actions, answers, due }
}

/// Whether `message` answers something the server sent or asked (what the reply delay times).
fn is_answer(message: &ClientMessage) -> bool {
    matches!(
        message,
        ClientMessage::TransitionShown { .. }
            | ClientMessage::TransitionReady { .. }
            | ClientMessage::JoinReady { .. }
            | ClientMessage::PossessionAcknowledged { .. }
    )
}

/// When the QUIC driver woke a read of the control stream that had nothing to give: the data
/// became readable then, and waited from then until the sessions' thread took it. Set by the
/// first wake after the read last found nothing to read. A wake that lands between the read
/// finding nothing and the stamp's reset is lost: that reply is timed from when it was read, a
/// little short.
#[derive(Debug, Default)]
struct ReadStamp {
    /// The first wake not yet taken.
    woken: Mutex<Option<std::time::Instant>>,
    /// The waker of the read's task, to wake in turn.
    task: Mutex<Option<Waker>>,
}

impl ReadStamp {
    /// The first wake since the last take, if any.
    fn take(&self) -> Option<std::time::Instant> {
        self.woken.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Wake for ReadStamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(std::time::Instant::now);
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            task.wake_by_ref();
        }
    }
}

/// Runs `read` with its wakes stamped ([`ReadStamp`]) before they reach the task.
async fn stamped<F: Future>(read: F, stamp: &Arc<ReadStamp>) -> F::Output {
    let mut read = std::pin::pin!(read);
    std::future::poll_fn(|cx| {
        {
            let mut task = stamp.task.lock().unwrap_or_else(PoisonError::into_inner);
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let waker = Waker::from(stamp.clone());
        let polled = read.as_mut().poll(&mut Context::from_waker(&waker));
        if polled.is_pending() {
            // Woken with nothing readable in order (a datagram ahead of a lost one, say): the
            // network's delay, not the client's. The stamp starts from the next wake.
            stamp.take();
        }
        polled
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::SessionConfig;

    /// The body of `message` as it comes off the wire.
    fn body_of(message: &ServerMessage) -> Vec<u8> {
        let frame = gatehouse_protocol::encode_frame(message, 1 << 20).unwrap();
        frame[gatehouse_protocol::codec::LENGTH_PREFIX_LEN..].to_vec()
    }

    /// A thin session skips the others' world: no snapshot, and of a batch only the changes
    /// about itself or naming pawns only; a full one, and a thin one before its `Welcome`, read
    /// every message whole.
    #[test]
    fn a_thin_session_reads_only_what_it_keeps() {
        let now = std::time::Instant::now();
        let config = SessionConfig { full: false, ..Default::default() };
        let thin = super::super::welcomed(now, config.clone(), "sim-0002");
        let snapshot =
            ServerMessage::WorldSnapshot(Box::new(gatehouse_protocol::samples::world_snapshot()));
        assert_eq!(read_message(&body_of(&snapshot), &thin).unwrap(), None);
        let changes = gatehouse_protocol::samples::replicated_changes();
        let batch = ServerMessage::Replicated { changes: changes.clone() };
        let Some(ServerMessage::Replicated { changes: kept }) =
            read_message(&body_of(&batch), &thin).unwrap()
        else {
            panic!("the own changes are kept")
        };
        // The samples: sim-0002's state, sim-0003 left, sim-0002's pawn, a destruction, its
        // tags, its health, a death, a teleport: all but the other player's departure.
        let mut expected = changes.clone();
        expected.remove(1);
        assert_eq!(kept, expected);
        let other = super::super::welcomed(now, config, "sim-0009");
        let Some(ServerMessage::Replicated { changes: kept }) =
            read_message(&body_of(&batch), &other).unwrap()
        else {
            panic!("the pawn-only changes are kept")
        };
        assert_eq!(kept.len(), 3, "{kept:?}");
        let full = SessionConfig { full: true, ..Default::default() };
        let full = super::super::welcomed(now, full, "sim-0002");
        assert_eq!(read_message(&body_of(&snapshot), &full).unwrap(), Some(snapshot.clone()));
        assert_eq!(read_message(&body_of(&batch), &full).unwrap(), Some(batch));
    }

    /// Batching, on the client's side: a client that streams nothing answers a `ShowTransition`
    /// with its `TransitionShown` and its `TransitionReady` in one chunk (one datagram for the
    /// server to read), the ready's zero-length deadline handled in the same wake; with a stream to
    /// wait for, the wake carries the `TransitionShown` alone.
    #[test]
    fn a_client_ready_at_once_answers_a_show_in_one_chunk() {
        use gatehouse_protocol::{FrameDecoder, LevelName, NodeId, TransitionId};
        let answers = |stream_time: Duration| {
            let config = SessionConfig {
                full: false,
                stream_time: (stream_time, stream_time),
                ..Default::default()
            };
            let now = std::time::Instant::now();
            let mut session = super::super::welcomed(now, config, "sim-0000");
            let hello = session.poll_output();
            assert!(matches!(
                hello,
                Some(Output::Send { message: ClientMessage::Hello { .. }, .. })
            ));
            session.handle(
                now,
                ServerMessage::ShowTransition {
                    transition_id: TransitionId(4),
                    target_node: NodeId::new("harbor").unwrap(),
                    levels: vec![LevelName::new("harbor_docks").unwrap()],
                    rooms: Vec::new(),
                },
            );
            let mut decoder = FrameDecoder::new(1024);
            let turn = wake_turn(&mut session, now, 1024);
            assert!(turn.answers, "a TransitionShown at least: a reply");
            assert_eq!(turn.due.is_some(), stream_time.is_zero(), "the ready's deadline was due");
            let [LinkAction::Write { link: LinkId::FIRST, chunk }] = turn.actions.as_slice() else {
                panic!("one chunk for the first link: {:?}", turn.actions)
            };
            decoder.extend(chunk);
            let mut messages = Vec::new();
            while let Ok(Some(message)) = decoder.next_message::<ClientMessage>() {
                messages.push(message);
            }
            messages
        };
        let shown = ClientMessage::TransitionShown { transition_id: TransitionId(4) };
        let ready = ClientMessage::TransitionReady { transition_id: TransitionId(4) };
        assert_eq!(answers(Duration::ZERO), vec![shown.clone(), ready]);
        assert_eq!(answers(Duration::from_millis(50)), vec![shown]);
    }
    /// Only what answers the server is timed as a reply: a restart request, a leave or a
    /// hello is the client's own initiative.
    #[test]
    fn only_answers_to_the_server_are_timed_as_replies() {
        use gatehouse_protocol::{JoinId, PawnId, TransitionId};
        let id = TransitionId(1);
        let answers = [
            ClientMessage::TransitionShown { transition_id: id },
            ClientMessage::TransitionReady { transition_id: id },
            ClientMessage::JoinReady { join_id: JoinId(2) },
            ClientMessage::PossessionAcknowledged { pawn_id: PawnId(3) },
        ];
        assert!(answers.iter().all(is_answer));
        let own = [ClientMessage::RestartRequest, ClientMessage::Leave];
        assert!(!own.iter().any(is_answer));
    }

    /// A move's outputs become the swarm's link actions in order (docs/spec/travel.md V3): the
    /// source's `TransitionShown` written on the first link, the destination dialled, its
    /// `Hello` with the ticket written on the new link (held by the links until it is open);
    /// the answer counts as a reply.
    #[test]
    fn a_moves_outputs_are_a_write_per_link_and_a_dial_in_order() {
        use gatehouse_protocol::{NodeId, TransitionId};
        let now = std::time::Instant::now();
        let mut session = super::super::welcomed(now, SessionConfig::default(), "sim-0000");
        let mut hello = Vec::new();
        take_actions(&mut session, 1024, &mut hello);
        assert!(matches!(hello.as_slice(), [LinkAction::Write { link: LinkId::FIRST, .. }]));
        session.handle(now, ServerMessage::FreezeCharacters { transition_id: TransitionId(7) });
        let travel = gatehouse_protocol::TravelTo {
            transition_id: TransitionId(7),
            node: NodeId::new("isle").unwrap(),
            address: "127.0.0.1:7001".into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            ticket: "a.ticket.here".into(),
            valid_ms: 10_000,
        };
        session.handle(now, ServerMessage::TravelTo(Box::new(travel)));
        let turn = wake_turn(&mut session, now, 1024);
        assert!(turn.answers, "TransitionShown answers the source");
        let [
            LinkAction::Write { link: LinkId::FIRST, chunk: source },
            LinkAction::Dial { link: dialled, dial },
            LinkAction::Write { link: written, chunk: destination },
        ] = turn.actions.as_slice()
        else {
            panic!("{:?}", turn.actions)
        };
        assert_eq!((*dialled, *written), (LinkId(1), LinkId(1)));
        assert_eq!((dial.address.as_str(), dial.pin), ("127.0.0.1:7001", None));
        let decode = |chunk: &[u8]| {
            let mut decoder = FrameDecoder::new(1024);
            decoder.extend(chunk);
            std::iter::from_fn(|| decoder.next_message::<ClientMessage>().ok().flatten())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            decode(source),
            [ClientMessage::TransitionShown { transition_id: TransitionId(7) }]
        );
        assert!(matches!(
            decode(destination).as_slice(),
            [ClientMessage::Hello { token, .. }] if token == "a.ticket.here"
        ));
    }

    /// A read that is pending until its test says so, keeping the waker it was last given.
    struct Gate {
        open: std::rc::Rc<std::cell::Cell<bool>>,
        waker: std::rc::Rc<std::cell::RefCell<Option<Waker>>>,
    }

    impl Future for Gate {
        type Output = ();

        fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<()> {
            if self.open.get() {
                return std::task::Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            std::task::Poll::Pending
        }
    }

    /// The read stamp keeps the first wake since the read last found nothing: the instant its
    /// data became readable. A wake after which the read still finds nothing (a datagram ahead
    /// of a lost one) is the network's delay, and is forgotten.
    #[test]
    fn a_read_stamp_keeps_the_first_wake_since_the_read_last_found_nothing() {
        let stamp = Arc::new(ReadStamp::default());
        let open = std::rc::Rc::new(std::cell::Cell::new(false));
        let waker = std::rc::Rc::new(std::cell::RefCell::new(None::<Waker>));
        let gate = Gate { open: open.clone(), waker: waker.clone() };
        let mut read = std::pin::pin!(stamped(gate, &stamp));
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || read.as_mut().poll(&mut cx).is_ready();
        assert!(!poll());
        let wake = || waker.borrow().as_ref().expect("the read's waker").wake_by_ref();
        // Woken with nothing readable in order: forgotten at the next poll.
        wake();
        assert!(stamp.woken.lock().unwrap().is_some(), "the wake is stamped");
        assert!(!poll());
        assert_eq!(stamp.take(), None, "a wake that brought nothing is the network's");
        // Woken twice, then readable: the first wake is when the data was.
        let before = std::time::Instant::now();
        wake();
        let first = *stamp.woken.lock().unwrap();
        wake();
        open.set(true);
        assert!(poll());
        let taken = stamp.take();
        assert_eq!(taken, first, "the first wake is kept");
        assert!(taken.is_some_and(|at| at >= before));
        assert_eq!(stamp.take(), None, "taken once");
    }
}
