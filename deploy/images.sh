#!/usr/bin/env bash
# Builds the container images with no registry: statically linked release binaries of
# gatehouse-server and gatehouse-sim, then images FROM scratch (deploy/Dockerfile):
#   gatehouse-server:TAG   the server (HEALTHCHECK: gatehouse-server probe)
#   gatehouse-sim:TAG      the simulated clients
#   gatehouse-server:agones  the server built with the `agones` feature, which the Agones Fleet
#                          runs (deploy/agones/fleet.yaml; needs protoc: .ci/protoc installs it)
#   gatehouse-postgres:TAG the container soak's throwaway PostgreSQL store, FROM scratch too: the
#                          host's PostgreSQL (.ci/postgres installs the distribution's package
#                          when missing) and a cluster initdb made here (deploy/postgres-stage.sh)
# The gatehouse images run as uid 10001 with a writable /tmp, the config files in /etc/gatehouse
# and no shell; the PostgreSQL image as uid 10002, with no shell either.
# Prints the images' sizes. The server's build_info names the checkout's commit, or
# GATEHOUSE_REVISION when set (a build from a tarball).
#
#   deploy/images.sh             # TAG=dev, and gatehouse-server:agones
#   TAG=soak deploy/images.sh
#   AGONES=0 deploy/images.sh    # without the agones image (no protoc; the container soak)
#   POSTGRES=0 deploy/images.sh  # without the PostgreSQL image (no PostgreSQL on this machine)
#   AGONES_TAG=v2 deploy/images.sh   # the agones image as gatehouse-server:v2
#
# The binaries go to target/x86_64-unknown-linux-gnu/release/ (or under CARGO_TARGET_DIR),
# apart from the ordinary release build: `-C target-feature=+crt-static` links glibc in, and with an explicit --target it
# applies to the binaries only, not to build scripts and proc macros (which the compiler must
# load dynamically). No debug info: the images stay small.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${TAG:-dev}
agones=${AGONES:-1}
postgres=${POSTGRES:-1}
agones_tag=${AGONES_TAG:-agones}
triple=x86_64-unknown-linux-gnu
bin=${CARGO_TARGET_DIR:-target}/$triple/release
# Inside the repository whatever CARGO_TARGET_DIR says: the build context is the repository.
stage=target/image

dir_agones=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-agones-bin.XXXXXX")
trap 'rm -rf "$dir_agones"' EXIT
# The agones server: the same build with the feature, staged apart (the Dockerfile's
# SERVER_BIN), so the plain server image stays without the SDK client. Built first, so that
# the plain build below leaves $bin/gatehouse-server the plain server for whoever uses it next.
if [ "$agones" = 1 ]; then
    command -v "${PROTOC:-protoc}" >/dev/null \
        || { echo "error: the agones image needs protoc: run .ci/protoc (or AGONES=0)" >&2; exit 1; }
    started=$(date +%s)
    RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo \
        cargo build --release --locked --target "$triple" -p gatehouse-server --features agones
    echo "static agones server built in $(( $(date +%s) - started )) s"
    if command -v file >/dev/null && file -b "$bin/gatehouse-server" | grep -q 'dynamically linked'; then
        echo "error: $bin/gatehouse-server (agones) is not statically linked" >&2
        exit 1
    fi
    cp "$bin/gatehouse-server" "$dir_agones/gatehouse-server"
fi

started=$(date +%s)
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo \
    cargo build --release --locked --target "$triple" \
    -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
echo "static binaries built in $(( $(date +%s) - started )) s"
for b in gatehouse-server gatehouse-sim; do
    # A dynamic binary would fail in a scratch image with a bare "no such file or directory".
    if command -v file >/dev/null && file -b "$bin/$b" | grep -q 'dynamically linked'; then
        echo "error: $bin/$b is not statically linked: $(file -b "$bin/$b")" >&2
        exit 1
    fi
done

# The image tree git cannot hold: modes, an empty /tmp, the users. .dockerignore lets
# target/image/ into the build context and nothing else of target/.
rm -rf "$stage"
mkdir -p "$stage/rootfs/etc" "$stage/rootfs/tmp" "$stage/data" "$stage/bin"
chmod 1777 "$stage/rootfs/tmp"
chmod 0755 "$stage/rootfs" "$stage/rootfs/etc"
chmod 0700 "$stage/data"
printf '%s\n' 'root:x:0:0:root:/:/nonexistent' \
    'gatehouse:x:10001:10001:gatehouse:/var/lib/gatehouse:/nonexistent' >"$stage/rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'gatehouse:x:10001:' >"$stage/rootfs/etc/group"
chmod 0644 "$stage/rootfs/etc/passwd" "$stage/rootfs/etc/group"
cp "$bin/gatehouse-server" "$bin/gatehouse-sim" "$stage/bin/"
if [ "$agones" = 1 ]; then
    mkdir -p "$stage/bin-agones"
    cp "$dir_agones/gatehouse-server" "$stage/bin-agones/"
fi
if [ "$postgres" = 1 ]; then
    deploy/postgres-stage.sh
fi

build() { # TARGET IMAGE [BUILD-ARG...]
    local log target=$1 image=$2
    shift 2
    log=$(mktemp)
    if ! docker build -f deploy/Dockerfile --target "$target" -t "$image" "$@" . >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "error: docker build of $image failed" >&2
        exit 1
    fi
    rm -f "$log"
}
started=$(date +%s)
build server "gatehouse-server:$tag"
build sim "gatehouse-sim:$tag"
images=("gatehouse-server:$tag" "gatehouse-sim:$tag")
if [ "$agones" = 1 ]; then
    build server "gatehouse-server:$agones_tag" --build-arg SERVER_BIN=target/image/bin-agones/gatehouse-server
    images+=("gatehouse-server:$agones_tag")
fi
if [ "$postgres" = 1 ]; then
    build postgres "gatehouse-postgres:$tag"
    images+=("gatehouse-postgres:$tag")
fi
echo "images built in $(( $(date +%s) - started )) s"
for image in "${images[@]}"; do
    size=$(docker image inspect -f '{{.Size}}' "$image")
    awk -v image="$image" -v size="$size" \
        'BEGIN { printf "image %-24s %6.1f MB (%d bytes)\n", image, size / 1e6, size }'
done
