//! Death respawn across both sides (docs/spec/transitions.md T13): a hazard kills, the client asks
//! to restart, the server possesses a new pawn, and the client's pawn-bound gates open again for
//! the new pawn's generation.

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_protocol::{ClientMessage, PawnId, ServerMessage};
use gatehouse_tests::sim::{Sim, SimConfig};

use crate::common::*;

/// No HUD or input left dead after a respawn: acknowledging possession rebinds the pawn-bound UI on
/// every possession (docs/spec/transitions.md T8, T14), and a subscription belongs to one pawn
/// generation (docs/spec/gates.md G6, G12): after a death and a restart, the client acknowledges
/// the new pawn and its local character gate (`Lifecycle.Gate.Character.LocalReady`) opens for the
/// new generation; the server counts the player placed only once that acknowledgement arrives, and
/// the dead pawn goes last.
#[test]
fn a_respawn_rebinds_the_hud_to_the_new_pawn() {
    let mut config = SimConfig::new(HAZARDOUS, 51);
    config.session = SessionConfig { restart_after_death: Some(ms(300)), ..config.session };
    let mut sim = Sim::new(config);
    let ann = sim.connect("ann");
    sim.run_until("ann placed", secs(5), all_placed);
    let first = sim.session(ann).own_pawn().unwrap();
    sim.run_until("ann's first local gate", secs(2), |s| {
        s.session(ann).client().is_character_init_gate_open(first)
    });
    let first_generation = sim.session(ann).client().pawn_generation(first).unwrap();

    sim.run_until("ann died", secs(5), |s| s.session(ann).stats().deaths == 1);
    assert!(sim.session(ann).is_dead_or_respawning());
    sim.run_until("the new pawn possessed", secs(5), |s| s.session(ann).stats().respawns == 1);
    let second = sim.session(ann).own_pawn().unwrap();
    assert_ne!(second, first, "a new pawn");
    let unacknowledged = &sim.game().snapshot().players[0];
    assert_eq!(unacknowledged.pawn, Some(second));
    assert!(!unacknowledged.placed, "not placed while its acknowledgement is on the way");

    let acknowledges = move |m: &ClientMessage| matches!(m, ClientMessage::PossessionAcknowledged { pawn_id } if *pawn_id == second);
    sim.run_until("the acknowledgement arrived", secs(1), |s| {
        s.arrived_at_server(ann, acknowledges).is_some()
    });
    let me = &sim.game().snapshot().players[0];
    assert_eq!((me.pawn, me.placed, me.dead, me.owned_pawns), (Some(second), true, false, 1));

    sim.run_until("the HUD bound to the new pawn", secs(2), |s| {
        s.session(ann).client().is_character_init_gate_open(second)
    });
    let game_side = sim.session(ann).client();
    assert_ne!(game_side.pawn_generation(second), Some(first_generation), "a new generation");
    assert!(!game_side.is_character_init_gate_open(first), "nothing bound to the dead pawn");
    assert_eq!(game_side.gate_stats().local_ready_opened, 2, "one local gate per generation");
    assert_eq!(game_side.gate_stats().pawn_generations.local, 2);
    assert!(!sim.session(ann).is_dead_or_respawning(), "the death state is gone");
    assert!(!sim.session(ann).is_loading(), "no loading screen: no level changed");
    assert_eq!(sim.session(ann).pawns_owned_by(sim.player(ann)), 1, "the dead pawn destroyed");
    let possessed = sim.received_at(ann, is_possessing(second)).unwrap();
    let destroyed = sim.received_at(ann, is_destroying(first)).unwrap();
    assert!(possessed <= destroyed, "the dead pawn goes last");
    assert_eq!(sim.game().counters().transitions_started, 1, "no transition: only the boot");
    assert_clean(&sim, ann);
}

fn is_possessing(pawn: PawnId) -> impl Fn(&ServerMessage) -> bool {
    move |m| matches!(m, ServerMessage::Possessed { pawn_id } if *pawn_id == pawn)
}

/// The destruction of `pawn`, alone or in a batch (docs/protocol.md 4.4).
fn is_destroying(pawn: PawnId) -> impl Fn(&ServerMessage) -> bool {
    move |m| {
        gatehouse_tests::carries(
            m,
            |m| matches!(m, ServerMessage::PawnDestroyed { pawn_id } if *pawn_id == pawn),
        )
    }
}
