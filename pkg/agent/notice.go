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

// noticeWatcher polls the instance metadata service for a spot
// interruption notice and rebalance recommendations.
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

// watch polls until ctx ends. It sends the first interruption notice on
// notices and returns; each new rebalance recommendation goes to
// rebalance. Failed requests are retried on the next poll: the service
// being briefly unreachable must not end the watch.
func (w *noticeWatcher) watch(ctx context.Context, notices chan<- Notice, rebalance func(Notice)) {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	var lastRebalance *time.Time
	for {
		if n, ok := w.instanceAction(ctx); ok {
			notices <- n
			return
		}
		if t, ok := w.rebalance(ctx); ok && (lastRebalance == nil || !lastRebalance.Equal(t)) {
			lastRebalance = &t
			rebalance(Notice{Action: "rebalance", Time: t})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
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
