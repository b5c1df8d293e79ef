//! Latent gaps in the gates' contract (docs/spec/gates.md) that the server and the simulated client
//! happen not to reach, each shown by the arrival order or the call that reaches it.

use std::cell::RefCell;
use std::rc::Rc;

use gatehouse_client_sim::gates::{
    LOCAL_CHARACTER_INIT_GATE_OPENED, REMOTE_CHARACTER_INIT_GATE_OPENED,
};
use gatehouse_client_sim::ids::{LOCAL_PLAYER, LOGIN};
use gatehouse_lifecycle::{Requirement, WaitStatus};
use gatehouse_messaging::{Listen, Match};
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G7 and G14: unpossession revokes the local viewer's dispatch-returned fact
/// when applicable. When the new possession arrives before the old pawn's unpossession, the new
/// local pawn has already returned its dispatch; the old pawn's retirement must not revoke it, or
/// every remote pawn arriving afterwards stays stuck until the next local dispatch.
#[test]
fn a_newer_local_pawn_keeps_the_viewers_dispatch_returned_when_the_old_one_is_unpossessed() {
    let mut sim = Sim::new();
    sim.ready_pair();
    // A respawn whose possession of the new pawn arrives before the old pawn's unpossession.
    sim.spawn(3, ME);
    sim.possess(3);
    assert!(sim.client().is_character_init_gate_open(gatehouse_protocol::PawnId(3)));
    sim.unpossess(1);
    let returned = LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED;
    assert!(
        sim.client().registry().is_ready_on(LOCAL_PLAYER, returned),
        "pawn 3 returned its dispatch and is still possessed"
    );
    // A remote pawn arriving now opens at once.
    sim.ready_player_state(CAROL, 2);
    sim.after(UI_MS);
    sim.clear_events();
    sim.spawn(4, CAROL);
    assert_eq!(sim.gate_events(), [Event::Remote(4)]);

    // The last local generation that returned it retiring does revoke it.
    sim.unpossess(3);
    assert!(!sim.client().registry().is_ready_on(LOCAL_PLAYER, returned));
}

/// The login fact is closed or retired when its session is replaced (docs/spec/gates.md G6). A
/// login session replaced by another gets a new login generation, so a wait composed on the old
/// session's login fact is retired with it instead of surviving into the new session.
#[test]
fn a_replaced_login_session_gets_a_new_login_generation() {
    let mut sim = Sim::new();
    sim.welcome();
    let (registry, state) = sim.client_mut().registry_and_state();
    let old = registry.token(LOGIN).unwrap();
    let requirements = [
        Requirement::new(old, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED),
        // Never published on the login object: the wait stays pending.
        Requirement::new(old, LIFECYCLE_FACT_WORLD_BEGIN_PLAY),
    ];
    let status =
        registry.wait_for_all(old, "Online.Profile", &requirements, state, |_, _| {}).unwrap();
    assert_eq!(status, WaitStatus::Pending);

    // The session is replaced: a new session of this game welcomes it as another player (the
    // game side outlives its sessions; one session takes one `Welcome`).
    sim.welcome_in_new_session(CAROL);
    let registry = sim.client().registry();
    let new = registry.token(LOGIN).unwrap();
    assert_ne!(new, old, "a new session is a new login generation");
    assert!(registry.is_ready(Requirement::new(new, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED)));
    assert!(!registry.is_current(old));
    assert!(!registry.is_pending(LOGIN, "Online.Profile"), "the old session's wait is retired");

    // The same session welcomed again is no replacement.
    sim.welcome_in_new_session(CAROL);
    assert_eq!(sim.client().registry().token(LOGIN), Some(new));
}

/// What a delegate listener saw: which delegate, the pawn, whether the gate read open.
type Seen = (&'static str, u64, bool);

/// docs/spec/gates.md G14: before external callbacks, the adapter latches the generation (an Unreal
/// game's `bClientInitGateOpened`), then broadcasts `OnLocalCharacterInitGateOpened`. So inside the
/// delegate, `IsCharacterInitGateOpen` already reads true; the same holds for the remote gate.
#[test]
fn inside_the_character_gate_delegates_the_gate_reads_open() {
    let mut sim = Sim::new();
    // (delegate, pawn, whether the gate read open inside it)
    let seen: Rc<RefCell<Vec<Seen>>> = Rc::default();
    let (router, core) = sim.client_mut().router_and_core();
    let mut held = Vec::new();
    for (name, channel) in
        [("local", LOCAL_CHARACTER_INIT_GATE_OPENED), ("remote", REMOTE_CHARACTER_INIT_GATE_OPENED)]
    {
        let seen = seen.clone();
        let listener = router
            .listen(core, Listen::channel(channel, Match::Exact), move |d, opened| {
                let open = d.state().is_character_init_gate_open(opened.pawn);
                seen.borrow_mut().push((name, opened.pawn.0, open));
            })
            .unwrap();
        held.push(listener);
    }
    sim.ready_pair();
    assert_eq!(*seen.borrow(), [("local", 1, true), ("remote", 2, true)]);
    // Outside, the query agrees once the dispatch completed.
    let core_view = sim.client_mut().router_and_core().1;
    assert!(core_view.is_character_init_gate_open(gatehouse_protocol::PawnId(1)));
    assert!(sim.client().is_character_init_gate_open(gatehouse_protocol::PawnId(1)));
    // A retired generation reads closed.
    sim.unpossess(1);
    let core_view = sim.client_mut().router_and_core().1;
    assert!(!core_view.is_character_init_gate_open(gatehouse_protocol::PawnId(1)));
}
