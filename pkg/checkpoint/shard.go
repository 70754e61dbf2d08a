package checkpoint

import (
	"context"
	"fmt"
)

// shardsDir holds, beside a job's checkpoints, the shards of a gang's
// ranks other than 0.
const shardsDir = "shards"

// OpenShard opens the store of one rank's own checkpoints in a gang of
// several nodes (its shards), kept beside the job's under
// <jobID>/shards/rank-<rank>/ with the layout, manifests and verification
// of the job's checkpoints, which are rank 0's and never list them. It is
// a Store of its own, to be closed apart from s.
func (s *Store) OpenShard(ctx context.Context, rank int) (*Store, error) {
	if rank < 1 {
		return nil, fmt.Errorf("checkpoint: shards are of ranks 1 and above, not %d: rank 0's checkpoints are the job's", rank)
	}
	shard, err := open(ctx, s.bucketURL, s.jobID, fmt.Sprintf("%s/%s/rank-%d/", s.jobID, shardsDir, rank))
	if err == nil {
		shard.SetRun(s.run)
	}
	return shard, err
}
