//! A fleet of two real servers on 127.0.0.1 sharing one throwaway PostgreSQL store, for the
//! tests of travel between servers (docs/spec/travel.md): the end-to-end suite
//! (`tests/e2e/travel.rs`) and the hostile-client suite (`server/tests/hostile.rs`).
//!
//! `hub-1` stands on `hub` and marks `dungeon` remote; `dungeon-1` stands on `dungeon` and marks
//! `hub` remote, under `fleet.directory = "static"`. Each server's ports are taken before either
//! starts, so each names the other in `[[fleet.servers]]`. The PostgreSQL store is the one
//! `GATEHOUSE_TEST_POSTGRES_URL` names, as the store suite's (docs/testing.md, "PostgreSQL
//! tests"): each test makes a [`Schema`] of its own there and drops it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_server::config::ServerConfig;
use sqlx::{Connection as _, Executor as _};

use crate::TestServer;

/// The variable that names the PostgreSQL server for the tests (docs/testing.md, "PostgreSQL
/// tests").
pub const POSTGRES_ENV: &str = "GATEHOUSE_TEST_POSTGRES_URL";
/// The fleet key of both servers (`fleet.ticket_key`, docs/spec/travel.md V8, V14).
pub const FLEET_KEY: &str = "a-fleet-key-of-thirty-two-bytes-0";
/// How long each server waits between its route travels, ms (docs/testing.md, "Travel between
/// two servers").
pub const ROUTE_MS: u64 = 4000;

/// `hub-1`'s world: it stands on `hub`; `dungeon` is hosted by another server
/// (docs/spec/travel.md V1).
pub fn hub_world(route: bool) -> String {
    world("hub", "hub_square", "dungeon", route)
}

/// `dungeon-1`'s world: it stands on `dungeon`; `hub` is hosted by another server
/// (docs/spec/travel.md V1).
pub fn dungeon_world(route: bool) -> String {
    world("dungeon", "dungeon_gate", "hub", route)
}

/// A world standing on `node` (one level, `level`), with `remote` another server's, and with
/// `route` a travel to `remote` every [`ROUTE_MS`].
fn world(node: &str, level: &str, remote: &str, route: bool) -> String {
    let world = format!(
        "start_node = \"{node}\"\ndefault_preset = \"Vanguard\"\n\
         [[preset]]\nname = \"Vanguard\"\ncharacter_def = \"Vanguard\"\n\
         [[node]]\nid = \"{node}\"\nlevels = [{{ name = \"{level}\", stream_ms = 200 }}]\n\
         spawn_points_register_ms = 20\n\
         [[node]]\nid = \"{remote}\"\nremote = true\n"
    );
    match route {
        true => crate::worlds::with_route(&world, &[remote], ROUTE_MS),
        false => world,
    }
}

/// A schema of its own in the test database (docs/testing.md, "Travel between two servers"),
/// dropped by [`Schema::drop`]. Each of its writes
/// of a player row can be recorded, in order ([`Schema::record_writes`]): what the store wrote,
/// read behind its back.
pub struct Schema {
    base: String,
    name: String,
}

impl Schema {
    /// A fresh schema in the database `GATEHOUSE_TEST_POSTGRES_URL` names.
    pub async fn create() -> Schema {
        let base = std::env::var(POSTGRES_ENV).unwrap_or_else(|_| {
            panic!(
                "set {POSTGRES_ENV} to run the travel tests (docs/testing.md, \"PostgreSQL tests\")"
            )
        });
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("gh_travel_{}_{nanos}", std::process::id());
        let mut conn = sqlx::PgConnection::connect(&base).await.unwrap();
        conn.execute(format!("CREATE SCHEMA {name}").as_str()).await.unwrap();
        conn.close().await.unwrap();
        Schema { base, name }
    }

    /// The `store.url` of the schema.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.name)
    }

    /// Records every write of a player row, in commit order, in `player_writes` (a trigger),
    /// once the servers made the table.
    pub async fn record_writes(&self) {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        for statement in [
            "CREATE TABLE player_writes (seq BIGSERIAL PRIMARY KEY, player_id TEXT NOT NULL, \
             version BIGINT NOT NULL, node TEXT, handoff BOOLEAN NOT NULL)",
            "CREATE FUNCTION record_player_write() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN INSERT INTO player_writes (player_id, version, node, handoff) \
             VALUES (NEW.player_id, NEW.version, NEW.node, NEW.handoff IS NOT NULL); \
             RETURN NEW; END $$",
            "CREATE TRIGGER player_writes AFTER INSERT OR UPDATE ON players \
             FOR EACH ROW EXECUTE FUNCTION record_player_write()",
        ] {
            conn.execute(statement).await.unwrap();
        }
        conn.close().await.unwrap();
    }

    /// Every recorded write, in order: `(player, version, node, handoff)`.
    pub async fn writes(&self) -> Vec<(String, i64, Option<String>, bool)> {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        let rows = sqlx::query_as(
            "SELECT player_id, version, node, handoff FROM player_writes ORDER BY seq",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        rows
    }

    /// Each player's stored version.
    pub async fn versions(&self) -> BTreeMap<String, i64> {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        let rows: Vec<(String, i64)> = sqlx::query_as("SELECT player_id, version FROM players")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        rows.into_iter().collect()
    }

    /// Each player's holder, `players.held_by` (docs/spec/travel.md V17).
    pub async fn holders(&self) -> BTreeMap<String, Option<String>> {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        let rows: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT player_id, held_by FROM players")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        conn.close().await.unwrap();
        rows.into_iter().collect()
    }

    /// Drops the schema and everything in it.
    pub async fn drop(self) {
        let mut conn = sqlx::PgConnection::connect(&self.base).await.unwrap();
        conn.execute(format!("DROP SCHEMA {} CASCADE", self.name).as_str()).await.unwrap();
        conn.close().await.unwrap();
    }
}

/// Two free UDP ports on 127.0.0.1 for the servers' game ports: taken, noted, let go just
/// before the servers bind them.
fn two_ports() -> [SocketAddr; 2] {
    let sockets = [0, 1].map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    sockets.map(|socket| socket.local_addr().unwrap())
}

/// The config of `id` in a fleet of `hub-1` at `hub` and `dungeon-1` at `dungeon`, on `store`:
/// room for every client of the swarm, which all dial from 127.0.0.1 (each per-address budget
/// above the swarm's size: players come from one address only in a test).
fn fleet_toml(id: &str, store: &str, hub: SocketAddr, dungeon: SocketAddr) -> String {
    format!(
        "[network]\nmax_players = 256\nmax_pending_connections = 512\nmax_pending_per_ip = 512\n\
         handshake_burst = 1024\nhandshakes_per_ip_per_s = 1000\n\
         [store]\nurl = \"{store}\"\nsession = \"{id}\"\n\
         [fleet]\nserver_id = \"{id}\"\ndirectory = \"static\"\nticket_key = \"{FLEET_KEY}\"\n\
         [[fleet.servers]]\nid = \"hub-1\"\naddress = \"{hub}\"\nserver_name = \"localhost\"\n\
         nodes = [\"hub\"]\n\
         [[fleet.servers]]\nid = \"dungeon-1\"\naddress = \"{dungeon}\"\n\
         server_name = \"localhost\"\nnodes = [\"dungeon\"]\n"
    )
}

/// The fleet: `hub-1` and `dungeon-1`, each on its port, sharing `schema`; with `routes`, each
/// travels to the other's node every [`ROUTE_MS`], `dungeon-1` half a route later
/// (docs/testing.md, "Travel between two servers").
pub async fn fleet(schema: &Schema, routes: bool) -> (TestServer, TestServer) {
    let [hub_addr, dungeon_addr] = two_ports();
    let store = schema.url();
    let start = |id: &'static str, world: String, bind: SocketAddr| {
        let toml = fleet_toml(id, &store, hub_addr, dungeon_addr);
        async move {
            TestServer::start_adjusted(&toml, &world, |config: &mut ServerConfig| {
                config.network.bind = bind;
            })
            .await
        }
    };
    let hub = start("hub-1", hub_world(routes), hub_addr).await;
    if routes {
        // The routes alternate: each server moves its players while the other stands still.
        tokio::time::sleep(Duration::from_millis(ROUTE_MS / 2)).await;
    }
    let dungeon = start("dungeon-1", dungeon_world(routes), dungeon_addr).await;
    (hub, dungeon)
}
