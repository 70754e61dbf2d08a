// Package deploy holds what an operator deploys refuel with. The test
// here keeps the IAM policies least-privileged as they change.
package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

type statement struct {
	Sid       string
	Effect    string
	Action    stringOrList
	Resource  stringOrList
	Condition map[string]map[string]stringOrList
}

type policy struct {
	Version   string
	Statement []statement
}

// stringOrList is IAM's "one value or a list of them".
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

func readPolicy(t *testing.T, path string) policy {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if p.Version != "2012-10-17" {
		t.Errorf("%s: Version %q, want 2012-10-17 (policy variables need it)", path, p.Version)
	}
	return p
}

// TestControlPlanePolicy: the worker may read the market anywhere, but
// launch only instances tagged for refuel and its deployment, and
// terminate or tag only such instances; no one may move an instance
// into or out of a deployment by retagging it.
func TestControlPlanePolicy(t *testing.T) {
	p := readPolicy(t, "iam-policy.json")
	mutating := []string{"ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances", "ec2:CreateFleet", "ec2:DeleteTags"}
	allowed := map[string]bool{}
	for _, s := range p.Statement {
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("%s: wildcard action %s", s.Sid, a)
			}
			if s.Effect == "Allow" {
				allowed[a] = true
			}
			if s.Effect == "Allow" && slices.Contains(mutating, a) && slices.Contains(s.Resource, "*") {
				t.Errorf("%s allows %s on every resource", s.Sid, a)
			}
		}
	}
	// What the AWS provider calls (pkg/cloud/aws).
	for _, a := range []string{"ec2:CreateFleet", "ec2:DescribeInstances", "ec2:TerminateInstances", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory", "ec2:DescribeAvailabilityZones", "ec2:GetSpotPlacementScores", "iam:PassRole"} {
		if !allowed[a] {
			t.Errorf("the provider needs %s, which no statement allows", a)
		}
	}
	scoped := func(s statement, key string) bool {
		eq := s.Condition["StringEquals"]
		return slices.Equal(eq[key+"/refuel:managed-by"], []string{"refuel"}) &&
			slices.Equal(eq[key+"/refuel:deployment"], []string{"${aws:PrincipalTag/refuel:deployment}"})
	}
	for _, s := range p.Statement {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			switch {
			case a == "ec2:TerminateInstances" && !scoped(s, "aws:ResourceTag"):
				t.Errorf("%s: terminate is not limited to instances tagged for refuel and the deployment", s.Sid)
			case a == "ec2:CreateTags" && !scoped(s, "aws:ResourceTag") && !slices.Equal(s.Condition["StringEquals"]["ec2:CreateAction"], []string{"CreateFleet", "RunInstances"}):
				t.Errorf("%s: tagging is neither limited to refuel's instances nor to launches", s.Sid)
			case (a == "ec2:CreateFleet" || a == "ec2:RunInstances") && slices.Contains(s.Resource, "arn:aws:ec2:*:*:instance/*") && !scoped(s, "aws:RequestTag"):
				t.Errorf("%s: launches an instance without the refuel and deployment tags", s.Sid)
			}
		}
	}
	denied := false
	for _, s := range p.Statement {
		keys := s.Condition["ForAnyValue:StringEquals"]["aws:TagKeys"]
		if s.Effect == "Deny" && slices.Contains(s.Action, "ec2:CreateTags") && slices.Contains(keys, "refuel:deployment") && slices.Contains(keys, "refuel:managed-by") {
			denied = true
		}
	}
	if !denied {
		t.Error("nothing denies retagging refuel:managed-by and refuel:deployment after launch")
	}
}

// TestNodePolicy: a node touches only its own run's checkpoints.
func TestNodePolicy(t *testing.T) {
	p := readPolicy(t, "iam-node-policy.json")
	const prefix = "checkpoints/${aws:PrincipalTag/refuel:run}/"
	for _, s := range p.Statement {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			if !strings.HasPrefix(a, "s3:") || strings.Contains(a, "*") {
				t.Errorf("%s: action %s; a node needs S3 object access only", s.Sid, a)
			}
		}
		for _, r := range s.Resource {
			if slices.Contains(s.Action, "s3:ListBucket") {
				for _, pre := range s.Condition["StringLike"]["s3:prefix"] {
					if !strings.HasPrefix(pre, prefix) {
						t.Errorf("%s: lists %q, outside the run's prefix", s.Sid, pre)
					}
				}
				continue
			}
			if _, key, _ := strings.Cut(r, ":::"); !strings.Contains(key, "/"+prefix) {
				t.Errorf("%s: resource %s is not under the run's prefix", s.Sid, r)
			}
		}
	}
}
