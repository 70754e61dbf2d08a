package activities

import (
	"refuel/pkg/checkpoint"
)

// StoreURL is the checkpoint store a job uses: its own, or the default.
func StoreURL(specURL, defaultURL string) string {
	if specURL != "" {
		return specURL
	}
	return defaultURL
}

func refOf(s *checkpoint.Store, m checkpoint.Manifest) *CheckpointRef {
	ref := &CheckpointRef{Step: m.Step, Time: m.CreatedAt, URL: s.StepURL(m.Step)}
	for _, f := range m.Files {
		ref.Bytes += f.Size
	}
	return ref
}
