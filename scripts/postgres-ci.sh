#!/usr/bin/env bash
# Provide PostgreSQL 15 + pgvector on 127.0.0.1:${PGPORT:-54329} for the test suite (team mode).
#
# The measured recipe of notes/dependencies.md §6: Debian's postgresql-15, pgvector built from
# Debian's trixie *source* package (bookworm has no pgvector binary), a cluster "ci" that listens on
# loopback only with trust auth (CI only: never use trust auth on a shared machine).
#
# Idempotent: a cluster already answering on the port with pgvector available is reused at once.
# Without root or apt it does nothing and says so (tests needing PostgreSQL then skip locally and
# fail under CI=true). It exports nothing: the Makefile hands tests MEMTOC_TEST_PG_URL.
set -euo pipefail

PGPORT=${PGPORT:-54329}
PGVER=15
CLUSTER=ci

say() { echo "postgres-ci: $*" >&2; }

ready() {
  command -v psql >/dev/null 2>&1 &&
    psql -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atqc \
      "create extension if not exists vector" >/dev/null 2>&1
}

if ready; then
  say "reusing PostgreSQL with pgvector on 127.0.0.1:$PGPORT"
  exit 0
fi

soft_fail() {
  # Locally a missing server only skips the PostgreSQL tests; under CI it is an error.
  if [ "${CI:-}" = "true" ]; then
    say "ERROR: $*"
    exit 1
  fi
  say "SKIPPING PostgreSQL provisioning: $* (PostgreSQL tests will be skipped)"
  exit 0
}

[ "$(id -u)" = 0 ] || soft_fail "not root"
command -v apt-get >/dev/null 2>&1 || soft_fail "apt-get not found (not a Debian machine)"

provision() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "postgresql-$PGVER" "postgresql-server-dev-$PGVER" dpkg-dev make gcc
  local pg_config="/usr/lib/postgresql/$PGVER/bin/pg_config"
  if [ ! -f "$("$pg_config" --sharedir)/extension/vector.control" ]; then
    local W
    W=$(mktemp -d)
    mkdir -p "$W/lists/partial" "$W/cache/archives/partial" "$W/parts"
    local MIRROR
    MIRROR=$(apt-cache policy | awk '$3=="bookworm/main" {print $2; exit}')
    [ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
    echo "deb-src $MIRROR trixie main" >"$W/sources.list"
    local APTO=(-o Dir::Etc::sourcelist="$W/sources.list" -o Dir::Etc::sourceparts="$W/parts"
      -o Dir::State::Lists="$W/lists" -o Dir::Cache="$W/cache")
    apt-get "${APTO[@]}" update -q
    (cd "$W" && apt-get "${APTO[@]}" source --download-only pgvector &&
      dpkg-source -x pgvector_*.dsc src)
    make -C "$W/src" -j2 PG_CONFIG="$pg_config"
    make -C "$W/src" install PG_CONFIG="$pg_config"
    rm -rf "$W"
  fi
  if ! pg_lsclusters -h | awk -v v="$PGVER" -v c="$CLUSTER" '$1==v && $2==c {f=1} END {exit !f}'; then
    pg_createcluster "$PGVER" "$CLUSTER" --port "$PGPORT" -- --auth=trust
  fi
  if ! pg_lsclusters -h | awk -v v="$PGVER" -v c="$CLUSTER" '$1==v && $2==c && $4=="online" {f=1} END {exit !f}'; then
    # listen_addresses is passed at start time: written into the config it breaks the start.
    pg_ctlcluster "$PGVER" "$CLUSTER" start -- -o "-c listen_addresses=127.0.0.1"
  fi
  for _ in $(seq 50); do
    ready && return 0
    sleep 0.2
  done
  return 1
}

started=$(date +%s.%N)
if ! provision; then
  soft_fail "provisioning failed (see the output above)"
fi
say "PostgreSQL $PGVER + pgvector ready on 127.0.0.1:$PGPORT in $(echo "$(date +%s.%N) - $started" | bc 2>/dev/null || echo '?') s"
