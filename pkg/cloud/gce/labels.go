package gce

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
)

// The labels refuel puts on every instance, named as the contracts name
// them: the janitor finds a deployment's instances by them.
const (
	LabelRun        = "refuel-run"
	LabelPool       = "refuel-pool"
	LabelDeployment = "refuel-deployment"
)

// tagsKey is the metadata item that keeps an instance's tags exactly as
// requested: labels must be sanitized (see LabelValue), and a run's ID
// must come back as it was for the janitor to ask Temporal about it.
const tagsKey = "refuel-tags"

// maxLabel is GCE's limit on a label key's and value's length.
const maxLabel = 63

// LabelKey is the label a tag key becomes: refuel:run is refuel-run,
// refuel:pool refuel-pool, refuel:deployment refuel-deployment; any key
// goes through LabelValue's rules and starts with a letter, as GCE
// requires of keys.
func LabelKey(tag string) string {
	k := LabelValue(strings.ReplaceAll(tag, ":", "-"))
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		k = "k-" + k
	}
	if len(k) > maxLabel {
		k = shorten(k)
	}
	return k
}

// LabelValue is a tag value as GCE accepts it in a label: lowercase
// letters, digits, '-' and '_', at most 63 characters. Uppercase letters
// are lowered and every other character becomes '-'; a longer value keeps
// its first 54 characters and ends with 8 hex digits of its SHA-256, so
// two long values stay apart. Values that differ only in what this
// changes share a label; List tells them apart by the exact tags kept in
// the instance's metadata.
func LabelValue(v string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(v) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > maxLabel {
		return shorten(out)
	}
	return out
}

func shorten(s string) string {
	sum := sha256.Sum256([]byte(s))
	return s[:maxLabel-9] + "-" + hex.EncodeToString(sum[:])[:8]
}

// Labels are the labels of an instance carrying tags.
func Labels(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[LabelKey(k)] = LabelValue(v)
	}
	return out
}

// labelFilter is the aggregatedList filter of the instances labelled for
// every tag, in key order so the same tags give the same filter.
func labelFilter(tags map[string]string) string {
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		terms = append(terms, fmt.Sprintf("(labels.%s = %q)", LabelKey(k), LabelValue(tags[k])))
	}
	return strings.Join(terms, " AND ")
}

// tagsMetadata is the metadata item keeping tags exactly.
func tagsMetadata(tags map[string]string) *compute.MetadataItems {
	b, _ := json.Marshal(tags) // a map of strings always marshals
	v := string(b)
	return &compute.MetadataItems{Key: tagsKey, Value: &v}
}

// tagsOf reads an instance's tags: the exact ones from its metadata, or,
// for an instance launched without them, its labels under the tag keys
// refuel knows.
func tagsOf(inst *compute.Instance) map[string]string {
	if inst.Metadata != nil {
		for _, it := range inst.Metadata.Items {
			if it != nil && it.Key == tagsKey && it.Value != nil {
				var tags map[string]string
				if json.Unmarshal([]byte(*it.Value), &tags) == nil {
					return tags
				}
			}
		}
	}
	tags := map[string]string{}
	for _, k := range knownTags {
		if v, ok := inst.Labels[LabelKey(k)]; ok {
			tags[k] = v
		}
	}
	return tags
}

var knownTags = []string{capacity.TagManagedBy, capacity.TagRun, capacity.TagAttempt, capacity.TagIdentity,
	capacity.TagPool, capacity.TagTeam, capacity.TagDeployment}
