package jobenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMachineKeepsTheImageAndWithholdsRefuels(t *testing.T) {
	environ := []string{
		// What deep learning images and BLAS builds set: kept.
		"OPENBLAS_CORETYPE=Haswell", "OPENBLAS_L2_SIZE=512", "OMP_NUM_THREADS=4",
		"LD_LIBRARY_PATH=/usr/local/cuda/lib64", "CUDA_HOME=/usr/local/cuda", "CUDA_VISIBLE_DEVICES=0,1",
		"NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1", "NVIDIA_VISIBLE_DEVICES=all", "FI_PROVIDER=efa",
		"PATH=/usr/bin", "HOME=/root", "LC_ALL=C.UTF-8", "HF_HOME=/data/hf", "GCE_METADATA_HOST=169.254.169.254",
		// refuel's own: withheld.
		"AWS_ACCESS_KEY_ID=AKIA", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t", "AWS_PROFILE=p",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN=c", "GOOGLE_APPLICATION_CREDENTIALS=/sa.json", "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE=/tok",
		"AZURE_CLIENT_SECRET=a", "TEMPORAL_ADDRESS=t:7233", "TEMPORAL_API_KEY=k", "TEMPORAL_TLS_CLIENT_KEY_PATH=/k",
		"TEMPORAL_CODEC_AUTH=x", "REFUEL_CODEC_KEYS=/keys", "REFUEL_API_KEY_FILE=/api", "REFUEL_JOIN_TOKEN_FILE=/join",
		"REFUEL_SIM_CONTROL_TOKEN_FILE=/sim", "REFUEL_DEPLOYMENT=prod",
		// Not an entry at all.
		"=nameless", "NOEQUALS",
	}
	want := []string{
		"OPENBLAS_CORETYPE=Haswell", "OPENBLAS_L2_SIZE=512", "OMP_NUM_THREADS=4",
		"LD_LIBRARY_PATH=/usr/local/cuda/lib64", "CUDA_HOME=/usr/local/cuda", "CUDA_VISIBLE_DEVICES=0,1",
		"NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1", "NVIDIA_VISIBLE_DEVICES=all", "FI_PROVIDER=efa",
		"PATH=/usr/bin", "HOME=/root", "LC_ALL=C.UTF-8", "HF_HOME=/data/hf", "GCE_METADATA_HOST=169.254.169.254",
	}
	if diff := cmp.Diff(want, Machine(environ)); diff != "" {
		t.Errorf("Machine (-want +got):\n%s", diff)
	}
	if got := Names([]string{"B=1", "A=2", "B=3", "C"}); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Errorf("Names = %v", got)
	}
}

// notSecret are the variables refuel's code reads that are no secret of
// refuel's and so reach a job as the machine has them: who the user is,
// whether it runs in Kubernetes, where a Compute Engine instance's
// metadata server is (as Google's own clients read it), the demo
// trainer's knobs.
var notSecret = []string{"USER", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "GCE_METADATA_HOST", "FAKE_STEPS", "FAKE_LINES"}

// TestEveryVariableRefuelReadsIsWithheld reads refuel's source for every
// environment variable it reads (os.Getenv, os.LookupEnv, the flag
// helpers envOr and the like, constants named for a variable) and fails
// for one that would reach a job: a new setting or secret must be named
// under a withheld prefix, or listed in notSecret with a reason.
func TestEveryVariableRefuelReadsIsWithheld(t *testing.T) {
	root := filepath.Join("..", "..")
	readers := []string{"Getenv", "LookupEnv", "envOr", "envOrDefault", "durationEnv", "getenv"}
	read := map[string]string{} // name -> where
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			switch n := n.(type) {
			case *ast.CallExpr:
				var fn string
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				if slices.Contains(readers, fn) && len(n.Args) > 0 {
					name = stringLit(n.Args[0])
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) && (strings.HasPrefix(id.Name, "Env") || strings.HasSuffix(id.Name, "Env")) {
						name = stringLit(n.Values[i])
					}
				}
			}
			if name != "" {
				read[name] = path
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) < 20 {
		t.Fatalf("found only %d variables refuel reads (%v): the scan is broken", len(read), read)
	}
	for name, where := range read {
		if !Withheld(name) && !slices.Contains(notSecret, name) {
			t.Errorf("%s (read in %s) would reach every job: name it under one of %v, or list it in notSecret", name, where, WithheldPrefixes)
		}
	}
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "TEMPORAL_API_KEY", "REFUEL_CODEC_KEYS", "GOOGLE_APPLICATION_CREDENTIALS"} {
		if !Withheld(name) {
			t.Errorf("%s reaches jobs", name)
		}
	}
}

func stringLit(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil || s == "" || strings.ToUpper(s) != s || strings.ContainsAny(s, " -.") {
		return ""
	}
	return s
}
