-- Schema version 1, PostgreSQL dialect: player and session saves.
-- Keep in step with sqlite/0001_players_and_sessions.sql: same tables, columns and checks.
-- Never edit once released: add a new numbered file (the store refuses a changed migration).

CREATE TABLE players (
    player_id     TEXT        NOT NULL PRIMARY KEY,
    node          TEXT,
    preset_kind   TEXT        NOT NULL CHECK (preset_kind IN ('character', 'read_only')),
    preset_name   TEXT,
    character_def TEXT,
    kits          TEXT,
    inventory     TEXT        NOT NULL,
    equipment     TEXT        NOT NULL,
    version       BIGINT      NOT NULL CHECK (version > 0),
    saved_at      TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CHECK (
        (preset_kind = 'character' AND character_def IS NOT NULL AND kits IS NOT NULL
            AND preset_name IS NULL)
        OR (preset_kind = 'read_only' AND preset_name IS NOT NULL AND character_def IS NULL
            AND kits IS NULL)
    )
);

COMMENT ON TABLE players IS 'gatehouse player saves (store/model.rs PlayerSave), one row per player id';
COMMENT ON COLUMN players.preset_name IS 'read-only preset: its catalog name; the preset itself is never written';
COMMENT ON COLUMN players.kits IS 'saved character: JSON array of composed-kit gameplay-tag names';
COMMENT ON COLUMN players.inventory IS 'JSON array of {"item": NAME, "count": N}';
COMMENT ON COLUMN players.equipment IS 'JSON array of equipment-effect gameplay-tag names';
COMMENT ON COLUMN players.version IS 'bumped by every save; a save based on another version is a conflict';

CREATE TABLE sessions (
    session  TEXT        NOT NULL PRIMARY KEY,
    node     TEXT        NOT NULL,
    version  BIGINT      NOT NULL CHECK (version > 0),
    saved_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP
);

COMMENT ON TABLE sessions IS 'gatehouse session saves (store/model.rs SessionSave), one row per server world';
