//! The debugging cases of docs/spec/gates.md about adapters and gates, each shown not to happen
//! here (or, for a debugging aid, shown to work).

use gatehouse_client_sim::adapters::REMOTE_GATE;
use gatehouse_client_sim::ids::pawn_object;
use gatehouse_protocol::PawnId;
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G12: a callback must not fire for the wrong pawn. A subscription is filtered
/// by its subject: another pawn's gate, even of the same kind and owner class, never triggers it.
#[test]
fn a_pawn_subscription_never_fires_for_another_pawns_gate() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.player_state(CAROL, None, Some("Vanguard"));
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.spawn(2, BOB);
    sim.spawn(3, CAROL);
    sim.subscribe_pawn("carol's nameplate", 3, REMOTE_READY);
    sim.clear_events();
    sim.possess(1);
    assert_eq!(sim.events(), [Event::Local(1), Event::Remote(2)], "bob's gate alone opened");
    sim.player_state(CAROL, Some(2), Some("Vanguard"));
    assert!(sim.events().contains(&Event::Fired("carol's nameplate", 3)));
}

/// docs/spec/gates.md G9 and G14: a remote pawn that appears stuck. `blocking_facts` (and the
/// pending-wait listing printed at the end of a run) names every missing remote requirement: team,
/// class match, presentation, the local viewer's dispatch.
#[test]
fn a_stuck_remote_pawn_names_each_missing_fact() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.player_state(BOB, None, Some("Vanguard"));
    sim.spawn_as(2, BOB, "Medic");
    let blocking = sim.client().registry().blocking_facts(pawn_object(PawnId(2)), REMOTE_GATE);
    let facts: Vec<GameplayTag> = blocking.unwrap().iter().map(|r| r.fact).collect();
    assert_eq!(
        facts,
        [
            LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY,
            LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES,
            LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY,
            LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED,
        ]
    );
    let listing = sim.client().pending_waits().join("\n");
    assert!(listing.contains("'Character.RemoteGate' of pawn 2"), "{listing}");
    for named in [
        "Lifecycle.Fact.PlayerState.TeamReady on player state bob",
        "Lifecycle.Fact.Character.CharacterDefMatches on pawn 2",
        "Lifecycle.Fact.Character.LocalDispatchReturned on local player",
    ] {
        assert!(listing.contains(named), "{named} missing from:\n{listing}");
    }
}

/// docs/spec/gates.md G16: the team UI must not miss its initial colour. The team cache is set
/// before the widget controller exists; a consumer of the raw event would have had nothing to
/// colour. The presentation-only change arrives after the controller is ready, with the current
/// team.
#[test]
fn the_team_ui_gets_its_initial_colour_from_the_presentation_change() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(BOB, Some(2), Some("Vanguard"));
    let bob = player(BOB);
    assert_eq!(sim.client().domain().teams().team_of(&bob).map(|t| t.0), Some(2));
    assert!(!sim.client().domain().ui().is_ready(&bob), "the raw event came before the UI");
    assert_eq!(sim.events(), [Event::TeamRaw(BOB.into(), Some(2))]);
    sim.after(UI_MS);
    assert!(sim.client().domain().ui().is_ready(&bob));
    assert_eq!(sim.events().last(), Some(&Event::Presented(BOB.into(), Some(2))));
}

/// docs/spec/gates.md G6 and G12: a callback that never fires after a respawn. A subscription
/// belongs to one generation: the dead pawn's is retired with it (its handle no longer cancels
/// anything), and the consumer registers again for the replacement's new generation.
#[test]
fn a_callback_for_the_old_generation_never_fires_and_the_replacement_needs_its_own() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    let old = sim.subscribe_pawn("old pawn", 1, LOCAL_READY);
    sim.unpossess(1);
    assert!(!sim.client_mut().cancel_gate_subscription(&old), "retired with its generation");
    sim.spawn(4, ME);
    sim.subscribe_pawn("new pawn", 4, LOCAL_READY);
    sim.possess(4);
    sim.possess(1);
    let fired: Vec<Event> =
        sim.events().into_iter().filter(|e| matches!(e, Event::Fired(..))).collect();
    assert_eq!(fired, [Event::Fired("new pawn", 4)], "pawn 1's new generation had no subscriber");
    assert!(sim.client().is_character_init_gate_open(PawnId(1)), "yet its gate did open");
}

/// docs/spec/gates.md G13: nothing runs on a dedicated server, by design. The lifecycle subsystem
/// is a client thing: the server crate does not depend on the registry (or on the simulated client)
/// at all.
#[test]
fn the_dedicated_server_does_not_depend_on_the_lifecycle_registry() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../server/Cargo.toml");
    let manifest: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for section in ["dependencies", "build-dependencies"] {
        let deps = manifest.get(section).and_then(|d| d.as_table()).cloned().unwrap_or_default();
        for forbidden in ["gatehouse-lifecycle", "gatehouse-client-sim"] {
            assert!(!deps.contains_key(forbidden), "server [{section}] depends on {forbidden}");
        }
    }
    assert!(manifest["dependencies"].as_table().unwrap().contains_key("gatehouse-protocol"));
}
