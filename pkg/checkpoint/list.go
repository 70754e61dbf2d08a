package checkpoint

import (
	"context"
	"io"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// listTries is how many times list reads a listing that raced a write,
// waiting listWait longer before each try.
const (
	listTries = 10
	listWait  = 5 * time.Millisecond
)

// list reads every object the options select. A file store's listing
// fails when a file it walks is renamed or deleted under it: another
// node's upload, prune or output, in a store that several nodes share.
// Such a listing is read again.
func (s *Store) list(ctx context.Context, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	for try := 1; ; try++ {
		objs, err := s.listOnce(ctx, opts)
		if gcerrors.Code(err) != gcerrors.NotFound || try == listTries {
			return objs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(try) * listWait):
		}
	}
}

func (s *Store) listOnce(ctx context.Context, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	var objs []*blob.ListObject
	it := s.bucket.List(opts)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}
