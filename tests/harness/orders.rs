//! Arrival orders on the client (the local character requirements of docs/spec/gates.md G14 hold in
//! either order): possession of the own pawn before or after the player-state update that carries
//! its CharacterDef.

use gatehouse_tests::sim::{Sim, SimConfig};

use crate::common::*;

/// Which of the two arrives at the client first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    /// The server's own order: the save loads, the CharacterDef replicates, then the spawn.
    CharacterDef,
    /// The update is held back until the possession arrived.
    Possession,
}

/// Boots one client with the chosen order; returns the run once its local gate opened.
fn boot_with(first: First) -> Sim {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 61));
    let ann = sim.connect("ann");
    let hold = match first {
        First::CharacterDef => None,
        First::Possession => {
            Some(sim.hold_to_client(ann, is_character_def_of(sim.player(ann).clone())))
        }
    };
    sim.run_until("ann possessed", secs(5), |s| s.received_at(ann, is_possessed).is_some());
    if let Some(hold) = hold {
        assert!(sim.release(hold) >= 1, "the CharacterDef was held back");
    }
    sim.run_until("ann's local gate", secs(5), |s| {
        let session = s.session(ann);
        session.own_pawn().is_some_and(|p| session.client().is_character_init_gate_open(p))
    });
    let def = sim.received_at(ann, is_character_def_of(sim.player(ann).clone())).unwrap();
    let possessed = sim.received_at(ann, is_possessed).unwrap();
    match first {
        First::CharacterDef => assert!(def < possessed, "the CharacterDef arrived first"),
        First::Possession => assert!(possessed < def, "the possession arrived first"),
    }
    let gates = sim.session(ann).client().gate_stats();
    assert_eq!(gates.local_ready_opened, 1, "the gate opens once");
    assert_eq!(gates.pawn_generations.local, 1, "for one generation");
    assert_clean(&sim, ann);
    sim
}

/// docs/spec/gates.md G14, the local character requirements (player state CharacterDef ready, the
/// pawn's CharacterDef matching, possession acknowledged): the CharacterDef first, as the server
/// sends.
#[test]
fn the_local_gate_opens_when_the_character_def_arrives_before_possession() {
    boot_with(First::CharacterDef);
}

/// docs/spec/gates.md G14, the same requirements in the other order: the possession first, the
/// CharacterDef late; the gate waits for it, then opens once.
#[test]
fn the_local_gate_opens_when_possession_arrives_before_the_character_def() {
    boot_with(First::Possession);
}
