#!/usr/bin/env bash
# Stages the tree of the container soak's PostgreSQL image (deploy/Dockerfile, target
# `postgres`: gatehouse-postgres:TAG, FROM scratch) under target/image/postgres/, from the
# PostgreSQL installed on this machine: the distribution's package, which `.ci/postgres bindir`
# installs when it is missing (as root), as it does for the store tests. No registry is asked.
#
#   rootfs/   `postgres` and `pg_isready` at the paths they were installed at (symlinked from
#             /usr/local/bin), every shared library `ldd` names for them and for plpgsql.so, the
#             share directory (catalogs, time zone sets), the UTC zone file, /etc/passwd and
#             /etc/group (root and postgres, uid 10002), an empty /tmp;
#   pgdata/   data/: a cluster initdb made here (superuser `gatehouse`, UTF8, locale C, UTC,
#             WAL segments of 1 MB) with the database `gatehouse`; it listens on every address
#             of the container, without a Unix socket, and trusts TCP clients from loopback (the
#             health check) and from the container's own networks (`samenet`: the soak's private
#             network), asking no password; no durability (fsync off).
#
# A throwaway store for the soak's fleet, not a database to keep data in: anyone on its network
# is its superuser. initdb and `postgres --single` refuse to run as root: as root they run as
# the distribution's `postgres` user, on a scratch directory of its own. Called by
# deploy/images.sh after it has staged target/image/ (POSTGRES=0 there skips it).
set -euo pipefail
cd "$(dirname "$0")/.."

stage=target/image/postgres
uid=10002

bin=$(.ci/postgres bindir)
for tool in postgres initdb pg_isready pg_config; do
    [ -x "$bin/$tool" ] || { echo "error: no $bin/$tool (the PostgreSQL server package)" >&2; exit 1; }
done
share=$("$bin/pg_config" --sharedir)
pkglib=$("$bin/pg_config" --pkglibdir)

rm -rf "$stage"
mkdir -p "$stage/rootfs/etc" "$stage/rootfs/tmp" "$stage/rootfs/usr/local/bin" "$stage/pgdata"
chmod 1777 "$stage/rootfs/tmp"
rootfs=$(cd "$stage/rootfs" && pwd)

# The programs, their libraries (the dynamic loader included) and the files PostgreSQL reads.
mkdir -p "$rootfs$bin" "$rootfs$pkglib"
cp "$bin/postgres" "$bin/pg_isready" "$rootfs$bin/"
cp "$pkglib/plpgsql.so" "$rootfs$pkglib/"
ln -s "$bin/postgres" "$rootfs/usr/local/bin/postgres"
ln -s "$bin/pg_isready" "$rootfs/usr/local/bin/pg_isready"
for program in "$bin/postgres" "$bin/pg_isready" "$pkglib/plpgsql.so"; do
    ldd "$program" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
done | sort -u | while read -r lib; do
    cp -L --parents "$lib" "$rootfs/"
done
mkdir -p "$rootfs$(dirname "$share")"
cp -a "$share" "$rootfs$share"
rm -rf "$rootfs$share/man"
cp -L --parents /usr/share/zoneinfo/UTC "$rootfs/"
printf '%s\n' 'root:x:0:0:root:/:/nonexistent' \
    "postgres:x:$uid:$uid:postgres:/var/lib/postgresql:/nonexistent" >"$rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' "postgres:x:$uid:" >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"

# The cluster, made by initdb as a user who is not root, then the database in single-user mode.
work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-pg-stage.XXXXXX")
trap 'rm -rf "$work"' EXIT
as_owner() { "$@"; }
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "error: no postgres user to run initdb as" >&2; exit 1; }
    chown postgres: "$work"
    as_owner() { runuser -u postgres -- "$@"; }
fi
as_owner env TZ=UTC LC_ALL=C "$bin/initdb" -D "$work/data" -U gatehouse --auth=trust -E UTF8 \
    --locale=C --wal-segsize=1 --no-sync --no-instructions >"$work/initdb.log" 2>&1 ||
    { cat "$work/initdb.log" >&2; echo "error: initdb failed" >&2; exit 1; }
echo 'CREATE DATABASE gatehouse;' |
    as_owner env TZ=UTC LC_ALL=C "$bin/postgres" --single -D "$work/data" -c fsync=off postgres \
        >"$work/single.log" 2>&1 ||
    { cat "$work/single.log" >&2; echo "error: cannot create the database" >&2; exit 1; }
cat >>"$work/data/postgresql.conf" <<'CONF'

# deploy/postgres-stage.sh: the container soak's throwaway store.
listen_addresses = '*'
port = 5432
unix_socket_directories = ''
max_connections = 64
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
timezone = 'UTC'
log_timezone = 'UTC'
CONF
cat >"$work/data/pg_hba.conf" <<'HBA'
# deploy/postgres-stage.sh: TCP only (no Unix socket); trusted from loopback (the health check)
# and from the container's own networks: the soak's private network, which nothing else joins.
host all all 127.0.0.1/32 trust
host all all ::1/128      trust
host all all samenet      trust
HBA
cp -a "$work/data" "$stage/pgdata/data"
chmod 0700 "$stage/pgdata/data"
echo "PostgreSQL $("$bin/postgres" --version | awk '{ print $3 }') staged in $stage ($(du -sh "$stage" | cut -f1))"
