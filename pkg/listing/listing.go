// Package listing reads a bucket's listing whole, and again when it
// races a write.
//
// A file store's listing fails when a file it walks is renamed or
// deleted under it: another node's upload, prune or output, or another
// worker's shard, in a store that several share. Object stores list
// without that race; a listing of theirs is read once.
package listing

import (
	"context"
	"io"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// tries is how many times All reads a listing that raced a write,
// waiting wait longer before each try.
const (
	tries = 10
	wait  = 5 * time.Millisecond
)

// All reads every object of b that opts select (nil: all of them).
func All(ctx context.Context, b *blob.Bucket, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	for try := 1; ; try++ {
		objs, err := once(ctx, b, opts)
		if gcerrors.Code(err) != gcerrors.NotFound || try == tries {
			return objs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(try) * wait):
		}
	}
}

func once(ctx context.Context, b *blob.Bucket, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	var objs []*blob.ListObject
	it := b.List(opts)
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
