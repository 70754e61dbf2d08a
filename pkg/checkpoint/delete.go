package checkpoint

import (
	"context"
	"fmt"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"refuel/pkg/listing"
)

// DeleteAll removes every object under the job's prefix of the bucket:
// its checkpoints, good or not, and its logs. It returns how many
// objects it deleted. Manifests go first, so a
// checkpoint whose deletion is cut short is never left good with data
// missing.
func (s *Store) DeleteAll(ctx context.Context) (int, error) {
	// Collect first: deleting while listing confuses some drivers' paging.
	objs, err := listing.All(ctx, s.bucket, nil)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: list %s: %w", s.url, err)
	}
	var manifests, data []string
	for _, obj := range objs {
		if isManifest(obj) {
			manifests = append(manifests, obj.Key)
		} else {
			data = append(data, obj.Key)
		}
	}
	s.mu.Lock()
	clear(s.trusted)
	s.mu.Unlock()
	deleted := 0
	for _, key := range append(manifests, data...) {
		if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return deleted, fmt.Errorf("checkpoint: delete %s of %s: %w", key, s.url, err)
		}
		deleted++
	}
	s.removeEmptyDirs("")
	return deleted, nil
}

func isManifest(obj *blob.ListObject) bool {
	return len(obj.Key) >= len(manifestName) && obj.Key[len(obj.Key)-len(manifestName):] == manifestName
}
