package gce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"cloud.google.com/go/auth/credentials"
	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"
)

// ProviderName is how JobSpecs name Compute Engine in
// resources.providers unless Config.Name says otherwise.
const ProviderName = "gce"

// EnvProject is the environment variable the project may come from, as
// the worker's --gce-project flag says.
const EnvProject = "REFUEL_GCE_PROJECT"

// Config configures the Compute Engine provider. Zero values mean the
// defaults noted; only Project is required, plus Application Default
// Credentials unless Endpoint points at the simulator.
type Config struct {
	// Name is the provider's name in JobSpecs; default "gce".
	Name string
	// Project is the Google Cloud project instances are created in
	// (worker --gce-project, env REFUEL_GCE_PROJECT).
	Project string
	// Zones limits the zones considered (worker --gce-zones); empty means
	// every zone of the project that is UP.
	Zones []string
	// Endpoint overrides Compute Engine's endpoint, such as
	// http://127.0.0.1:8085/compute/v1/ for refuel's simulator (worker
	// --gce-endpoint); requests to it carry no credentials.
	Endpoint string
	// MachineTypes is the catalogue: the GPU machine types refuel
	// considers; default DefaultMachineTypes().
	MachineTypes []MachineType
	// Prices prices every offering; default DefaultPrices().
	Prices *PriceTable

	// Image is the boot disk's source image, which must have the worker
	// binary and start the node agent (see the package doc); default
	// DefaultImage.
	Image string
	// BootDiskGB is the boot disk's size; default 100.
	BootDiskGB int64
	// Network is the VPC network instances join; default
	// global/networks/default.
	Network string
	// Subnetworks maps a region to the subnetwork instances use there; a
	// region without one uses the network's auto subnetwork.
	Subnetworks map[string]string
	// ServiceAccount is the email of the account instances run as (their
	// agents read and write checkpoints with it); empty runs them with
	// none.
	ServiceAccount string
	// StartupScript is the instance's startup-script metadata: what
	// starts `worker agent` on boot (see the package doc).
	StartupScript string

	// PollInterval is how often Acquire checks a provisioning instance
	// until it runs; default 5s.
	PollInterval time.Duration
	// HTTPClient carries the API calls without Endpoint's authentication
	// rules; default the client library's. Tests set it.
	HTTPClient *http.Client
	// Clock is the time source; default time.Now.
	Clock func() time.Time
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// DefaultImage is a public image the default boot disk is made from; a
// real deployment names its own image with the worker binary in it.
const DefaultImage = "projects/debian-cloud/global/images/family/debian-12"

// MachineType is one entry of the catalogue.
type MachineType struct {
	// Name such as a2-highgpu-1g.
	Name string
	// Accelerator and GPUs attach GPUs to a machine type that has none
	// built in (N1: n1-standard-8 with nvidia-tesla-t4 ×1) through
	// guestAccelerators. Empty for the accelerator-optimized types (A2,
	// A3, G2), whose GPUs machineTypes reports.
	Accelerator string
	GPUs        int
}

// DefaultMachineTypes are GPU machine types whose GPUs come with them.
func DefaultMachineTypes() []MachineType {
	return []MachineType{
		{Name: "g2-standard-4"},
		{Name: "a2-highgpu-1g"},
		{Name: "a3-highgpu-1g"},
		{Name: "a3-highgpu-8g"},
	}
}

// withDefaults fills the zero values and rejects what cannot work, naming
// the setting to fix.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		cfg.Name = ProviderName
	}
	if cfg.Project == "" {
		cfg.Project = os.Getenv(EnvProject)
	}
	if cfg.Project == "" {
		return cfg, errors.New("no Google Cloud project: set --gce-project (env " + EnvProject + ") to the project instances are created in")
	}
	if cfg.MachineTypes == nil {
		cfg.MachineTypes = DefaultMachineTypes()
	}
	seen := map[string]bool{}
	for _, t := range cfg.MachineTypes {
		switch {
		case t.Name == "":
			return cfg, errors.New("Config.MachineTypes has an entry without a Name")
		case seen[t.Name]:
			return cfg, fmt.Errorf("Config.MachineTypes lists %s twice", t.Name)
		case (t.Accelerator == "") != (t.GPUs == 0) || t.GPUs < 0:
			return cfg, fmt.Errorf("Config.MachineTypes: %s needs both Accelerator and a positive GPUs, or neither", t.Name)
		}
		seen[t.Name] = true
	}
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.BootDiskGB <= 0 {
		cfg.BootDiskGB = 100
	}
	if cfg.Network == "" {
		cfg.Network = "global/networks/default"
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, nil
}

// service builds the Compute client: against Endpoint without
// credentials, or against Google with Application Default Credentials,
// found now so a worker without them fails at start saying what to set.
func (cfg Config) service(ctx context.Context) (*compute.Service, error) {
	var opts []option.ClientOption
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint), option.WithoutAuthentication())
		return compute.NewService(ctx, opts...)
	}
	if cfg.HTTPClient == nil {
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{compute.ComputeScope}})
		if err != nil {
			return nil, fmt.Errorf("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, "+
				"run `gcloud auth application-default login`, or run on GCE with a service account (--gce-endpoint for the simulator needs none): %w", err)
		}
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	return compute.NewService(ctx, opts...)
}
