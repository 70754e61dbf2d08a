package activities

import (
	"context"
	"errors"

	"refuel/pkg/checkpoint"
)

// Checkpoints holds the control plane's checkpoint activities.
type Checkpoints struct {
	// DefaultURL is the store for jobs whose spec names none.
	DefaultURL string
}

// LatestCheckpoint returns the newest verified checkpoint of a job, or nil
// when it has none yet.
func (a *Checkpoints) LatestCheckpoint(ctx context.Context, in CheckpointInput) (*CheckpointRef, error) {
	s, err := checkpoint.Open(ctx, StoreURL(in.URL, a.DefaultURL), in.JobID)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m, err := s.Latest(ctx)
	var nf *checkpoint.NotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return refOf(s, m), nil
}

// StoreURL is the checkpoint store a job uses: its own, or the default.
func StoreURL(specURL, defaultURL string) string {
	if specURL != "" {
		return specURL
	}
	return defaultURL
}

func refOf(s *checkpoint.Store, m checkpoint.Manifest) *CheckpointRef {
	return &CheckpointRef{Step: m.Step, Time: m.CreatedAt, URL: s.StepURL(m.Step)}
}
