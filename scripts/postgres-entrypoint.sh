#!/bin/sh
# Entry point of the PostgreSQL stand-in image (scripts/build-base-image.sh postgres): on the
# first start it does what the official postgres image's entry point does with the same
# variables, then runs the server in the foreground as the postgres user.
#   POSTGRES_PASSWORD          the superuser's password (required unless POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_USER              the superuser (default postgres)
#   POSTGRES_DB                a database created for it (default: POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  pg_hba.conf method for connections over the network (default scram-sha-256)
set -eu
[ "${1:-postgres}" = postgres ] || exec "$@"
PGDATA=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
    echo "error: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-postgres}" > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" >/dev/null
  rm -f "$pwfile"
  echo "host all all all $auth" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    as_postgres psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
    as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA"
