package agent

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Instance metadata paths, relative to /latest/meta-data/.
const (
	instanceActionPath = "spot/instance-action"
	rebalancePath      = "events/recommendations/rebalance"
)

// NoticeSource is an instance's notices read in-process: what a virtual
// instance's cloud publishes, and an agent process polls its metadata
// service for, heard as soon as it is published and at no cost between.
type NoticeSource interface {
	// Pending returns the interruption notice and the rebalance
	// recommendation published so far (nil when none), and a channel
	// closed at the next publication.
	Pending() (interruption, rebalance *Notice, changed <-chan struct{})
}

// noticeFeed is where a watch reads notices: the metadata service, or a
// NoticeSource.
type noticeFeed interface {
	// read returns the interruption notice and the rebalance
	// recommendation pending now; nil for what it did not see.
	read(ctx context.Context) (interruption, rebalance *Notice)
	// wait returns once there may be something new to read; false when
	// ctx ended first.
	wait(ctx context.Context) bool
}

// watch reads feed until ctx ends. It sends the first interruption
// notice on notices and returns; each new rebalance recommendation goes to
// rebalance.
func watch(ctx context.Context, feed noticeFeed, notices chan<- Notice, rebalance func(Notice)) {
	var lastRebalance *time.Time
	for {
		n, rb := feed.read(ctx)
		if n != nil {
			notices <- *n
			return
		}
		if rb != nil && (lastRebalance == nil || !lastRebalance.Equal(rb.Time)) {
			lastRebalance = &rb.Time
			rebalance(*rb)
		}
		if !feed.wait(ctx) {
			return
		}
	}
}

// sourceFeed reads a NoticeSource, waking only when it publishes.
type sourceFeed struct {
	src     NoticeSource
	changed <-chan struct{}
}

func (f *sourceFeed) read(context.Context) (*Notice, *Notice) {
	n, rb, changed := f.src.Pending()
	f.changed = changed
	return n, rb
}

func (f *sourceFeed) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-f.changed:
		return true
	}
}

// noticeWatcher polls the instance metadata service for a spot
// interruption notice and rebalance recommendations. Failed requests are
// retried on the next poll: the service being briefly unreachable must
// not end the watch.
type noticeWatcher struct {
	client *imds.Client
	every  time.Duration
}

func newNoticeWatcher(endpoint string, every time.Duration) *noticeWatcher {
	return &noticeWatcher{
		// IMDSv2 only: a session token is required, no silent fallback.
		client: imds.New(imds.Options{Endpoint: endpoint, EnableFallback: aws.FalseTernary}),
		every:  every,
	}
}

func (w *noticeWatcher) read(ctx context.Context) (*Notice, *Notice) {
	if n, ok := w.instanceAction(ctx); ok {
		return &n, nil
	}
	if t, ok := w.rebalance(ctx); ok {
		return nil, &Notice{Action: "rebalance", Time: t}
	}
	return nil, nil
}

func (w *noticeWatcher) wait(ctx context.Context) bool {
	t := time.NewTimer(w.every)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// instanceAction reads a pending interruption. A notice whose body cannot
// be read is still a notice: the instance is going away either way.
func (w *noticeWatcher) instanceAction(ctx context.Context) (Notice, bool) {
	var body struct {
		Action string    `json:"action"`
		Time   time.Time `json:"time"`
	}
	if !w.get(ctx, instanceActionPath, &body) {
		return Notice{}, false
	}
	return Notice{Action: body.Action, Time: body.Time}, true
}

func (w *noticeWatcher) rebalance(ctx context.Context) (time.Time, bool) {
	var body struct {
		NoticeTime time.Time `json:"noticeTime"`
	}
	ok := w.get(ctx, rebalancePath, &body)
	return body.NoticeTime, ok
}

// get reports whether path exists, decoding its JSON into v as far as it
// can. The service answers 404 when there is nothing to report; that and a
// failed request both mean nothing was seen this time.
func (w *noticeWatcher) get(ctx context.Context, path string, v any) bool {
	out, err := w.client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return false
	}
	defer out.Content.Close()
	_ = json.NewDecoder(io.LimitReader(out.Content, 1<<16)).Decode(v)
	return true
}
