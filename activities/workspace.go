package activities

import (
	"context"

	"refuel/pkg/checkpoint"
)

// DeleteWorkspaceName is the activity that deletes a development
// environment's workspace from its store, run on the control plane.
const DeleteWorkspaceName = "DeleteWorkspace"

// DeleteWorkspaceInput names an environment whose store goes.
type DeleteWorkspaceInput struct {
	// ID is the environment's id: its saves and its command's output
	// lie under it in the store.
	ID string `json:"id"`
	// StoreURL is the store its attempts used (TrainingInput's
	// CheckpointURL); "" is the worker's.
	StoreURL string `json:"store_url,omitempty"`
}

// DeleteWorkspaceResult says what went.
type DeleteWorkspaceResult struct {
	URL     string `json:"url"`
	Objects int    `json:"objects"`
}

// Workspaces deletes development environments' workspaces.
type Workspaces struct {
	// DefaultStoreURL is the worker's store, for inputs that name none.
	DefaultStoreURL string
}

// DeleteWorkspace deletes an environment's saves and output from its
// store. Deleting what is gone already succeeds, so a retry after a
// partial deletion finishes it.
func (w *Workspaces) DeleteWorkspace(ctx context.Context, in DeleteWorkspaceInput) (DeleteWorkspaceResult, error) {
	store, err := checkpoint.Open(ctx, StoreURL(in.StoreURL, w.DefaultStoreURL), in.ID)
	if err != nil {
		return DeleteWorkspaceResult{}, err
	}
	defer store.Close()
	n, err := store.DeleteAll(ctx)
	return DeleteWorkspaceResult{URL: store.URL(), Objects: n}, err
}
