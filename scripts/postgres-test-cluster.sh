#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: initdb in a temporary directory as an
# unprivileged user, listening on 127.0.0.1 (a free port) and a Unix socket in that directory.
#
#   eval "$(scripts/postgres-test-cluster.sh start)"     # exports ANTLER_TEST_DATABASE_URL
#   scripts/postgres-test-cluster.sh stop "$ANTLER_TEST_POSTGRES_DIR"
#
# The tests that need PostgreSQL create a database of their own from ANTLER_TEST_DATABASE_URL.
# Trust authentication, fsync off: nothing here is meant to outlive the test run. With openssl
# the server also accepts TLS, its certificate (for localhost and 127.0.0.1) signed by a CA made
# here, whose certificate ANTLER_TEST_POSTGRES_CA names (the TLS test verifies against it).
set -euo pipefail

bin_dir() {
  if [ -n "${POSTGRES_BIN:-}" ]; then echo "$POSTGRES_BIN"; return; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
  # Debian and Ubuntu keep the server binaries off PATH, one directory per major version.
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$found" ]; then
    echo "no PostgreSQL found: install it (apt-get install -y postgresql) or set POSTGRES_BIN" >&2
    exit 1
  fi
  echo "$found"
}

# The Debian package creates the postgres user; elsewhere it is made here.
ensure_owner() {
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
}

# Runs a command as the unprivileged user that owns the cluster (initdb refuses root).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    ensure_owner
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# A throwaway CA and a server certificate it signed, for localhost and 127.0.0.1.
make_certificates() {
  local dir="$1"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=antler test CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' \
    >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/server.ext" -out "$dir/server.pem" >/dev/null 2>&1
  chmod 600 "$dir/server.key"
}

free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 40000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "no free port found on 127.0.0.1" >&2
  exit 1
}

start() {
  local bin dir port
  bin=$(bin_dir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/antler-pg.XXXXXX")
  chmod 755 "$dir"
  local tls_options=""
  if command -v openssl >/dev/null 2>&1 && make_certificates "$dir"; then
    tls_options="-c ssl=on -c ssl_cert_file=$dir/server.pem -c ssl_key_file=$dir/server.key"
  fi
  if [ "$(id -u)" -eq 0 ]; then
    ensure_owner
    chown -R postgres: "$dir"
  fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  port=$(free_port)
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 $tls_options" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  echo "export ANTLER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
  echo "export ANTLER_TEST_POSTGRES_DIR=$dir"
  if [ -n "$tls_options" ]; then
    echo "export ANTLER_TEST_POSTGRES_CA=$dir/ca.pem"
  fi
}

stop() {
  local dir="${1:-${ANTLER_TEST_POSTGRES_DIR:-}}"
  if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
    echo "usage: $0 stop DIR (the ANTLER_TEST_POSTGRES_DIR that start printed)" >&2
    exit 64
  fi
  as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 64 ;;
esac
