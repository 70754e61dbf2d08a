package jobs

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// StoreURL is the bucket of a run's checkpoints and logs: the store its
// status records, so the answer is the same from any directory and after
// its instances are gone. A run recorded before runs said, or one no
// worker answers for, is read from the start of its history with dc (the
// client's, so an encrypted spec decodes): its spec's checkpoint.url, or
// fallback when the spec names none.
func StoreURL(ctx context.Context, c client.Client, dc converter.DataConverter, id, fallback string) (string, error) {
	if st, err := Status(ctx, c, id); err == nil && st.StoreURL != "" {
		return st.StoreURL, nil
	}
	iter := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return "", fmt.Errorf("%s has no history", id)
	}
	ev, err := iter.Next()
	if err != nil {
		return "", fmt.Errorf("read the history of %s: %w", id, err)
	}
	input := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(input) == 0 {
		return "", fmt.Errorf("%s started with no JobSpec", id)
	}
	var js struct {
		Checkpoint struct {
			URL string `json:"url"`
		} `json:"checkpoint"`
	}
	if err := dc.FromPayload(input[0], &js); err != nil {
		return "", fmt.Errorf("read the JobSpec of %s: %w; are the same codec keys set as the worker's?", id, err)
	}
	if js.Checkpoint.URL != "" {
		return js.Checkpoint.URL, nil
	}
	if fallback == "" {
		return "", errors.New("the run's spec names no checkpoint.url: pass the worker's store as --checkpoint-url")
	}
	return fallback, nil
}
