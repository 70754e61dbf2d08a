package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	// dbFileName is the SQLite file inside Options.DataDir.
	dbFileName = "temporal.db"
	// clusterName is the single cluster's name, recorded in the database.
	clusterName = "active"
	// retention keeps closed runs visible for a week: long enough to look at
	// the cost of last week's jobs, short enough that the file stays small.
	retention = 7 * 24 * time.Hour
)

// memoryDatabases numbers in-memory databases: SQLite shares a named
// in-memory database within a process, so each Start needs its own name.
var memoryDatabases atomic.Int64

// stores are the databases the server keeps workflow executions and
// their visibility records in: one SQLite database for both, or two
// PostgreSQL databases.
type stores struct {
	executions, visibility *config.SQL
}

// openDatabase prepares the stores Options name: PostgreSQL's when
// Options.Postgres is set, else SQLite's.
func openDatabase(o Options) (stores, error) {
	if o.Postgres != "" {
		return openPostgres(o.Postgres, o.Namespace, o.SearchAttributes)
	}
	db, err := openSQLite(o.DataDir, o.Namespace, o.SearchAttributes)
	return stores{executions: db, visibility: db}, err
}

// openSQLite prepares the SQLite store: the schema when the file is new,
// and the namespace (with its search attributes) when it is missing. Doing
// the namespace here rather than through the API means it is usable the
// moment the server starts, without waiting for a namespace cache refresh.
func openSQLite(dataDir, namespace string, attrs map[string]enums.IndexedValueType) (*config.SQL, error) {
	db := &config.SQL{PluginName: sqliteplugin.PluginName}
	if dataDir == "" {
		// The plugin creates the schema itself when it opens an in-memory
		// database, and never closes its connection, so the database lives
		// until the process exits.
		db.DatabaseName = "refuel-devserver-" + strconv.FormatInt(memoryDatabases.Add(1), 10)
		db.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else if err := openFile(db, dataDir); err != nil {
		return nil, err
	}

	if err := createNamespace(db, namespace, attrs); err != nil {
		return nil, err
	}
	return db, nil
}

// createNamespace writes the namespace into the executions database unless
// it is there. The schema tools' function for it is SQLite's by name but
// works on any SQL plugin.
func createNamespace(db *config.SQL, namespace string, attrs map[string]enums.IndexedValueType) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, attrs)
	if err != nil {
		return fmt.Errorf("devserver: namespace %s: %w", namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(db, ns); err != nil {
		return fmt.Errorf("devserver: create namespace %s: %w", namespace, err)
	}
	return nil
}

// openFile points db at DataDir/temporal.db and creates the schema when the
// file does not exist yet. The database holds every run's history, so it
// is made 0600 in a 0700 directory; SQLite gives its journal files the
// database file's mode.
func openFile(db *config.SQL, dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("devserver: data directory: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dataDir, dbFileName))
	if err != nil {
		return fmt.Errorf("devserver: data directory: %w", err)
	}
	db.DatabaseName = path
	// A write-ahead log synced at its checkpoints rather than at every
	// commit: a process killed at any point (the server's own SIGKILL
	// included) loses nothing committed, and a machine that loses power
	// may lose its last commits but never the database. Syncing every
	// commit spent a third of the server's time in fsync under a storm
	// of recoveries.
	db.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"}

	_, err = os.Stat(path)
	if err == nil {
		return os.Chmod(path, 0o600)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devserver: database: %w", err)
	}
	if err := sqliteschema.SetupSchema(db); err != nil {
		// A half-created schema would be taken for a complete one next time.
		_ = os.Remove(path)
		return fmt.Errorf("devserver: create schema in %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
