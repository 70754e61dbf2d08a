package devserver

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	p "go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/common/resolver"
	serverschema "go.temporal.io/server/schema"
	pgschema "go.temporal.io/server/schema/postgresql/v12"
)

const (
	// defaultPostgresDatabase is the executions database when the URL
	// names none; visibility records go to it with visibilitySuffix.
	defaultPostgresDatabase = "temporal"
	visibilitySuffix        = "_visibility"
	// maintenanceDatabase is the one every PostgreSQL server has, which the
	// databases are created from.
	maintenanceDatabase = "postgres"
	// maxConns bounds each service's pool per database: a server's four
	// services on its two databases then hold at most 80 connections,
	// inside PostgreSQL's default limit of 100.
	maxConns = 10
)

// postgresSchema is a database's schema as the server's module embeds it:
// the directory of schema.sql and the version it brings a database to.
type postgresSchema struct {
	dir, version string
}

var (
	executionsSchema = postgresSchema{"postgresql/v12/temporal", pgschema.Version}
	visibilitySchema = postgresSchema{"postgresql/v12/visibility", pgschema.VisibilityVersion}
)

// postgresStores parses Options.Postgres into the two stores' settings.
func postgresStores(rawURL string) (stores, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return stores{}, fmt.Errorf("devserver: postgres URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return stores{}, fmt.Errorf("devserver: postgres URL %q: want postgres://USER[:PASSWORD]@HOST:PORT/DATABASE", u.Redacted())
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return stores{}, fmt.Errorf("devserver: postgres URL %q: HOST:PORT: %w", u.Redacted(), err)
	}
	if u.User.Username() == "" {
		return stores{}, fmt.Errorf("devserver: postgres URL %q: a user is required (postgres://USER@HOST:PORT/DATABASE)", u.Redacted())
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		name = defaultPostgresDatabase
	}
	if strings.ContainsAny(name, `/"`) {
		return stores{}, fmt.Errorf("devserver: postgres URL %q: database %q: no / or \" in its name", u.Redacted(), name)
	}
	password, _ := u.User.Password()
	attrs := map[string]string{}
	for k, v := range u.Query() {
		attrs[k] = v[len(v)-1]
	}
	store := func(db string) *config.SQL {
		return &config.SQL{
			PluginName: pgplugin.PluginName, ConnectAddr: u.Host, ConnectProtocol: "tcp",
			User: u.User.Username(), Password: password, DatabaseName: db, ConnectAttributes: attrs,
			MaxConns: maxConns, MaxIdleConns: maxConns, MaxConnLifetime: time.Hour,
		}
	}
	return stores{executions: store(name), visibility: store(name + visibilitySuffix)}, nil
}

// openPostgres creates the two databases and their schemas where missing,
// and the namespace, so that a fresh PostgreSQL serves at once.
func openPostgres(rawURL, namespace string, attrs map[string]enums.IndexedValueType) (stores, error) {
	db, err := postgresStores(rawURL)
	if err != nil {
		return stores{}, err
	}
	if err := ensureSchema(db.executions, sqlplugin.DbKindMain, executionsSchema); err != nil {
		return stores{}, err
	}
	if err := ensureSchema(db.visibility, sqlplugin.DbKindVisibility, visibilitySchema); err != nil {
		return stores{}, err
	}
	if err := createNamespace(db.executions, namespace, attrs); err != nil {
		return stores{}, err
	}
	return db, nil
}

// ensureSchema creates cfg's database unless it exists, and its schema
// unless the database records a version. The version is written last, so a
// database that has one has its whole schema; the server checks that the
// version is one it can run on.
func ensureSchema(cfg *config.SQL, kind sqlplugin.DbKind, schema postgresSchema) error {
	if err := createDatabase(cfg); err != nil {
		return err
	}
	db, err := sql.NewSQLAdminDB(kind, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("devserver: open database %s: %w", cfg.DatabaseName, err)
	}
	defer db.Close()
	if v, err := db.ReadSchemaVersion(cfg.DatabaseName); err == nil && v != "" {
		return nil
	}
	text, err := fs.ReadFile(serverschema.Assets(), path.Join(schema.dir, "schema.sql"))
	if err != nil {
		return fmt.Errorf("devserver: the server's embedded schema %s: %w", schema.dir, err)
	}
	statements, err := p.LoadAndSplitQueryFromReaders([]io.Reader{bytes.NewReader(text)})
	if err != nil {
		return fmt.Errorf("devserver: schema %s: %w", schema.dir, err)
	}
	if err := db.CreateSchemaVersionTables(); err != nil {
		return fmt.Errorf("devserver: schema version tables in %s: %w", cfg.DatabaseName, err)
	}
	for _, stmt := range statements {
		if err := db.Exec(stmt); err != nil {
			return fmt.Errorf("devserver: schema of %s (a database left half set up is dropped with DROP DATABASE %q): %q: %w",
				cfg.DatabaseName, cfg.DatabaseName, stmt, err)
		}
	}
	if err := db.UpdateSchemaVersion(cfg.DatabaseName, schema.version, schema.version); err != nil {
		return fmt.Errorf("devserver: schema version of %s: %w", cfg.DatabaseName, err)
	}
	return nil
}

// duplicateDatabase is PostgreSQL's error code for a database that exists.
const duplicateDatabase = "42P04"

// createDatabase creates cfg's database through the maintenance database,
// and is content when it exists.
func createDatabase(cfg *config.SQL) error {
	maintenance := *cfg
	maintenance.DatabaseName = maintenanceDatabase
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, &maintenance, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("devserver: connect to postgres at %s: %w", cfg.ConnectAddr, err)
	}
	defer db.Close()
	err = db.CreateDatabase(cfg.DatabaseName)
	if err == nil || strings.Contains(err.Error(), duplicateDatabase) || strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return fmt.Errorf("devserver: create database %s at %s: %w", cfg.DatabaseName, cfg.ConnectAddr, err)
}
