package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Invocation is one way a deploy file starts a refuel binary: the
// binary (worker or starter), its arguments and the environment
// variables it is given.
type Invocation struct {
	Where  string // file and service or container
	Binary string
	Args   []string
	Env    []string
}

// Invocations lists how the compose file and the Kubernetes manifests
// under dir start refuel's binaries, so a test can hold every flag and
// variable against the binaries' own.
func Invocations(dir string) ([]Invocation, error) {
	out, err := composeInvocations(filepath.Join(dir, "docker-compose.yaml"))
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "kubernetes", "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		inv, err := manifestInvocations(f)
		if err != nil {
			return nil, err
		}
		out = append(out, inv...)
	}
	return out, nil
}

// LoadCompose loads a compose file as docker compose does: its schema
// checked, interpolated, normalised and checked for consistency.
func LoadCompose(file string) (*types.Project, error) {
	ctx := context.Background()
	details, err := loader.LoadConfigFiles(ctx, []string{file}, filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	details.Environment = map[string]string{}
	return loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("refuel", true) })
}

func composeInvocations(file string) ([]Invocation, error) {
	p, err := LoadCompose(file)
	if err != nil {
		return nil, err
	}
	var out []Invocation
	for name, s := range p.Services {
		if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			continue
		}
		argv := append(append([]string{}, s.Entrypoint...), s.Command...)
		if len(s.Entrypoint) == 0 {
			argv = append([]string{"/usr/local/bin/worker"}, s.Command...) // the image's entrypoint
		}
		inv := Invocation{Where: file + " service " + name, Binary: path.Base(argv[0]), Args: argv[1:]}
		for k := range s.Environment {
			inv.Env = append(inv.Env, k)
		}
		out = append(out, inv)
	}
	return out, nil
}

// Manifest is one Kubernetes object of a manifest file.
type Manifest struct {
	File       string
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Doc        []byte `json:"-"`
}

// ReadManifests splits a manifest file into its documents.
func ReadManifests(file string) ([]Manifest, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		m := Manifest{File: file, Doc: doc}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, m)
	}
}

func manifestInvocations(file string) ([]Invocation, error) {
	ms, err := ReadManifests(file)
	if err != nil {
		return nil, err
	}
	var out []Invocation
	for _, m := range ms {
		var pod corev1.PodSpec
		switch m.APIVersion + " " + m.Kind {
		case "apps/v1 Deployment":
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict(m.Doc, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			pod = d.Spec.Template.Spec
		case "apps/v1 DaemonSet":
			var d appsv1.DaemonSet
			if err := yaml.UnmarshalStrict(m.Doc, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			pod = d.Spec.Template.Spec
		case "batch/v1 Job":
			var j batchv1.Job
			if err := yaml.UnmarshalStrict(m.Doc, &j); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			pod = j.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range pod.Containers {
			argv := append(append([]string{}, c.Command...), c.Args...)
			if len(c.Command) == 0 {
				argv = append([]string{"/usr/local/bin/worker"}, c.Args...)
			}
			inv := Invocation{Where: fmt.Sprintf("%s %s container %s", file, m.Kind, c.Name), Binary: path.Base(argv[0]), Args: argv[1:]}
			for _, e := range c.Env {
				inv.Env = append(inv.Env, e.Name)
			}
			out = append(out, inv)
		}
	}
	return out, nil
}

// Flags are the flags an argument list passes (--name or --name=value),
// without their dashes.
func Flags(args []string) []string {
	var out []string
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "-"); ok {
			name = strings.TrimPrefix(name, "-")
			name, _, _ = strings.Cut(name, "=")
			out = append(out, name)
		}
	}
	return out
}
