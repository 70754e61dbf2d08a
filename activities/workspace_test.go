package activities

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"

	"refuel/pkg/checkpoint"
)

func TestDeleteWorkspace(t *testing.T) {
	ctx := context.Background()
	storeURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	store, err := checkpoint.Open(ctx, storeURL, "dev-1")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Save(ctx, 1, t.TempDir(), "i-1"); err != nil {
		t.Fatal(err)
	}
	w := &Workspaces{DefaultStoreURL: storeURL}
	res, err := w.DeleteWorkspace(ctx, DeleteWorkspaceInput{ID: "dev-1"})
	if err != nil || res.Objects != 1 || res.URL != store.URL() {
		t.Fatalf("DeleteWorkspace: %+v, %v; want its one object from %s", res, err, store.URL())
	}
	if ms, err := store.List(ctx); err != nil || len(ms) != 0 {
		t.Errorf("the store still lists %v (%v)", ms, err)
	}
	// Again: nothing left, no error.
	if res, err := w.DeleteWorkspace(ctx, DeleteWorkspaceInput{ID: "dev-1", StoreURL: storeURL}); err != nil || res.Objects != 0 {
		t.Errorf("a second DeleteWorkspace: %+v, %v", res, err)
	}
}
