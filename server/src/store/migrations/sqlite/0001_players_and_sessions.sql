-- Schema version 1, SQLite dialect: player and session saves.
-- Keep in step with postgres/0001_players_and_sessions.sql: same tables, columns and checks.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

-- One row per player (store/model.rs `PlayerSave`). List columns hold JSON arrays:
-- kits and equipment of gameplay-tag names, inventory of {"item": NAME, "count": N}.
-- A read-only preset stores only its catalog name (preset_name): the checks below make a row
-- that writes a read-only preset's character or kits impossible.
CREATE TABLE players (
    player_id     TEXT    NOT NULL PRIMARY KEY,
    node          TEXT,
    preset_kind   TEXT    NOT NULL CHECK (preset_kind IN ('character', 'read_only')),
    preset_name   TEXT,
    character_def TEXT,
    kits          TEXT,
    inventory     TEXT    NOT NULL,
    equipment     TEXT    NOT NULL,
    version       INTEGER NOT NULL CHECK (version > 0),
    saved_at      TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CHECK (
        (preset_kind = 'character' AND character_def IS NOT NULL AND kits IS NOT NULL
            AND preset_name IS NULL)
        OR (preset_kind = 'read_only' AND preset_name IS NOT NULL AND character_def IS NULL
            AND kits IS NULL)
    )
) STRICT;

-- One row per server world (store/model.rs `SessionSave`), named by config `store.session`.
CREATE TABLE sessions (
    session  TEXT    NOT NULL PRIMARY KEY,
    node     TEXT    NOT NULL,
    version  INTEGER NOT NULL CHECK (version > 0),
    saved_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT;
