-- Schema version 2, PostgreSQL dialect: the handoff state of a travel's handoff save.
-- Keep in step with sqlite/0002_handoff_state.sql: same column.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

ALTER TABLE players ADD COLUMN handoff TEXT;

COMMENT ON COLUMN players.handoff IS 'travel handoff save only (game/src/model.rs HandoffState, docs/spec/travel.md V2): JSON {team, health, tags, effects with ms left, kits}, at most 64 KiB; NULL otherwise';
