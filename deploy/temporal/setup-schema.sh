#!/bin/sh
# Creates Temporal's two Postgres databases when they are missing and brings both schemas to the
# latest version this temporal-sql-tool's release ships, the one its server expects. Every step is
# a no-op on databases already up to date, so it runs before each start of the server.
#
# It reads the variables server.yaml reads (POSTGRES_SEEDS, DB_PORT, POSTGRES_USER, POSTGRES_PWD,
# DBNAME, VISIBILITY_DBNAME), and SCHEMA_DIR: the folder holding postgresql/v12, by default where
# the admin-tools image keeps it. The password reaches the tool through its environment, never its
# arguments.
set -eu

export SQL_PLUGIN=postgres12
export SQL_HOST="${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the Postgres host}"
export SQL_PORT="${DB_PORT:-5432}"
export SQL_USER="${POSTGRES_USER:?POSTGRES_USER must name the Postgres user}"
export SQL_PASSWORD="${POSTGRES_PWD:-}"
schema="${SCHEMA_DIR:-/etc/temporal/schema}/postgresql/v12"

setup() {
  db=$1
  versioned=$2
  echo "temporal schema: database $db from $versioned"
  temporal-sql-tool --db "$db" create-database
  temporal-sql-tool --db "$db" setup-schema -v 0.0
  temporal-sql-tool --db "$db" update-schema -d "$versioned"
}

setup "${DBNAME:-temporal}" "$schema/temporal/versioned"
setup "${VISIBILITY_DBNAME:-temporal_visibility}" "$schema/visibility/versioned"
echo "temporal schema: up to date"
