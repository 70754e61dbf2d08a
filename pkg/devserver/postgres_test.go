package devserver

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/server/common/config"
)

func TestPostgresStores(t *testing.T) {
	store := func(db string, attrs map[string]string) *config.SQL {
		return &config.SQL{PluginName: "postgres12", ConnectAddr: "127.0.0.1:5432", ConnectProtocol: "tcp",
			User: "refuel", Password: "pw", DatabaseName: db, ConnectAttributes: attrs,
			MaxConns: maxConns, MaxIdleConns: maxConns, MaxConnLifetime: time.Hour}
	}
	cases := map[string]struct {
		url     string
		want    stores
		wantErr string
	}{
		"database named": {
			url:  "postgres://refuel:pw@127.0.0.1:5432/runs?sslmode=disable",
			want: stores{store("runs", map[string]string{"sslmode": "disable"}), store("runs_visibility", map[string]string{"sslmode": "disable"})},
		},
		"database by default": {
			url:  "postgresql://refuel:pw@127.0.0.1:5432",
			want: stores{store("temporal", map[string]string{}), store("temporal_visibility", map[string]string{})},
		},
		"another scheme":   {url: "mysql://refuel@127.0.0.1:3306/temporal", wantErr: "want postgres://"},
		"no port":          {url: "postgres://refuel@127.0.0.1/temporal", wantErr: "HOST:PORT"},
		"no user":          {url: "postgres://127.0.0.1:5432/temporal", wantErr: "a user is required"},
		"quote in db name": {url: `postgres://refuel@127.0.0.1:5432/a"b`, wantErr: "no / or"},
		"password hidden":  {url: "postgres://refuel:secret@127.0.0.1/temporal", wantErr: "refuel:xxxxx@"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := postgresStores(c.url)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("postgresStores(%q) error %v; want one saying %q", c.url, err, c.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error %v shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, c.want, cmp.AllowUnexported(stores{})); diff != "" {
				t.Errorf("postgresStores(%q): got(-), want(+)\n%s", c.url, diff)
			}
		})
	}
}
