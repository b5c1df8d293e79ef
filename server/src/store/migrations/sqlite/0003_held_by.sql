-- Schema version 3, SQLite dialect: the server that holds each player's save.
-- Keep in step with postgres/0003_held_by.sql: same column.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

-- The `fleet.server_id` of the server that wrote the row (docs/spec/travel.md V17): a save, a
-- handoff save or a recall the source's, a claim the destination's, a login's take the
-- taker's. A session-token login that loads a row another server holds takes the player. NULL
-- for a server in no fleet, and for the rows of schemas 1 and 2.
ALTER TABLE players ADD COLUMN held_by TEXT;
