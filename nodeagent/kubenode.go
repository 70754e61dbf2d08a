package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
)

// The GPUs of a Kubernetes node, for `worker join --kube-node`: what the
// node's device plugin advertises as allocatable nvidia.com/gpu, read
// from the API server with the pod's service account (which needs get
// on nodes; deploy/kubernetes/join-daemonset.yaml grants it).

// inClusterDir is where Kubernetes mounts a pod's service account.
const inClusterDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kubeAPI is an API server and how to call it.
type kubeAPI struct {
	base   string // https://host:port
	token  string
	client *http.Client
}

// inCluster is the API server of the cluster the pod runs in.
func inCluster() (kubeAPI, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return kubeAPI{}, fmt.Errorf("--kube-node: not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)")
	}
	token, err := os.ReadFile(inClusterDir + "/token")
	if err != nil {
		return kubeAPI{}, fmt.Errorf("--kube-node: the pod's service account token: %w", err)
	}
	ca, err := os.ReadFile(inClusterDir + "/ca.crt")
	if err != nil {
		return kubeAPI{}, fmt.Errorf("--kube-node: the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return kubeAPI{}, fmt.Errorf("--kube-node: %s/ca.crt holds no certificate", inClusterDir)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return kubeAPI{base: "https://" + net.JoinHostPort(host, port), token: string(token), client: client}, nil
}

// nodeGPUs is the node's allocatable nvidia.com/gpu.
func (k kubeAPI) nodeGPUs(ctx context.Context, node string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.base+"/api/v1/nodes/"+url.PathEscape(node), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	resp, err := k.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("--kube-node %s: %w", node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("--kube-node %s: the API server answered %s (the service account needs get on nodes)", node, resp.Status)
	}
	var n struct {
		Status struct {
			Allocatable map[string]string `json:"allocatable"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return 0, fmt.Errorf("--kube-node %s: %w", node, err)
	}
	q, ok := n.Status.Allocatable["nvidia.com/gpu"]
	if !ok {
		return 0, fmt.Errorf("--kube-node %s: the node has no allocatable nvidia.com/gpu (is the NVIDIA device plugin running there?)", node)
	}
	gpus, err := strconv.Atoi(q)
	if err != nil || gpus < 1 {
		return 0, fmt.Errorf("--kube-node %s: allocatable nvidia.com/gpu is %q, not a count of GPUs", node, q)
	}
	return gpus, nil
}
