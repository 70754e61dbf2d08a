#!/bin/sh
# Creates Temporal's databases on PostgreSQL and brings both schemas to the
# version the admin-tools image ships. Every step is idempotent, so the
# compose step may run again on every `up`.
set -eu
: "${POSTGRES_SEEDS:?set POSTGRES_SEEDS to the PostgreSQL host}"
: "${POSTGRES_USER:?set POSTGRES_USER}"
: "${SQL_PASSWORD:?set SQL_PASSWORD to the PostgreSQL password}"
port=${DB_PORT:-5432}
schema=/etc/temporal/schema/postgresql/v12
sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$port" -u "$POSTGRES_USER" "$@"; }

until nc -z "$POSTGRES_SEEDS" "$port"; do echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$port"; sleep 2; done
for db in temporal temporal_visibility; do
  sql --db "$db" create || true # it may exist already
done
sql --db temporal setup-schema -v 0.0
sql --db temporal update-schema -d "$schema/temporal/versioned"
sql --db temporal_visibility setup-schema -v 0.0
sql --db temporal_visibility update-schema -d "$schema/visibility/versioned"
echo "Temporal's schemas are up to date"
