-- Schema version 3, PostgreSQL dialect: the server that holds each player's save.
-- Keep in step with sqlite/0003_held_by.sql: same column.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

ALTER TABLE players ADD COLUMN held_by TEXT;

COMMENT ON COLUMN players.held_by IS 'the fleet.server_id of the server that wrote the row (a save, a handoff save or recall the source, a claim the destination, a login''s take the taker; docs/spec/travel.md V17); NULL for a server in no fleet and for rows written before schema 3';
