-- Schema version 2, SQLite dialect: the handoff state of a travel's handoff save.
-- Keep in step with postgres/0002_handoff_state.sql: same column.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

-- The player state a handoff save carries beyond the other columns (game/src/model.rs
-- `HandoffState`, docs/spec/travel.md V2): one JSON object {team, health, tags, effects
-- (paused, with the milliseconds they have left), kits (the grant latches)}, at most 64 KiB
-- (server/src/store/codec.rs `MAX_HANDOFF_BYTES`). NULL for every other save, and for the
-- rows of schema 1.
ALTER TABLE players ADD COLUMN handoff TEXT;
