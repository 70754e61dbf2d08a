package pool

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"refuel/pkg/spec"
)

// A machine joins the base group (`worker join`) by proving it holds the
// deployment's token: it sends an HMAC of its name and session under the
// token, never the token, so the proof recorded in the join's history
// opens nothing else.

// MinTokenBytes keeps tokens out of reach of guessing.
const MinTokenBytes = 16

// ReadToken reads a join token file: its content, surrounding white
// space dropped.
func ReadToken(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("join token: %w", err)
	}
	tok := []byte(strings.TrimSpace(string(data)))
	if len(tok) < MinTokenBytes {
		return nil, fmt.Errorf("join token %s: %d bytes, fewer than %d: write a random token, e.g. `openssl rand -hex 32 > %s`", path, len(tok), MinTokenBytes, path)
	}
	return tok, nil
}

// JoinProof is what a machine named name presents for its session.
func JoinProof(token []byte, name, session string) string {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("refuel join\x00" + name + "\x00" + session))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckJoinProof reports whether proof is name's for session under token.
func CheckJoinProof(token []byte, name, session, proof string) bool {
	return hmac.Equal([]byte(JoinProof(token, name, session)), []byte(proof))
}

// ValidateJoining checks the machine a join describes, naming each bad
// field (join.gpus is `worker join --gpus`).
func ValidateJoining(n Node) error {
	ve := &spec.ValidationError{Kind: "join"}
	checkName(ve, "join.name", n.Name, "name the machine as the data centre does, e.g. gpu-node-01")
	checkMachine(ve, "join", n.InstanceType, n.Zone, n.GPUs, n.PricePerHour)
	return ve.Err()
}
