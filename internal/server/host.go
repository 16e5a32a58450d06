package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/classimage"
	"berth.dev/berth/internal/driver/kubernetes"
	"berth.dev/berth/internal/driver/podman"
	"berth.dev/berth/internal/forge/local"
)

// What the commands run on the gateway's host (berth admin, repo) do with
// its settings, without a gateway running.

// Bootstrap creates the first organisation, its project and an operator in
// the gateway's database, and mints the operator's key (berth admin
// bootstrap). It is Build's first phase only: it makes no driver.
func Bootstrap(ctx context.Context, cfg Config, org, project, user string) (api.Bootstrap, error) {
	b, err := Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return api.Bootstrap{}, err
	}
	defer b.Close()
	o, p, u, k, err := b.accounts.Bootstrap(ctx, org, project, user)
	if err != nil {
		return api.Bootstrap{}, err
	}
	return api.Bootstrap{
		Organisation: api.Organisation{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt},
		Project:      api.Project{ID: p.ID, Organisation: p.Org, Name: p.Name, Default: true, CreatedAt: p.CreatedAt},
		User:         api.User{ID: u.ID, Organisation: u.Org, Name: u.Name, Role: string(u.Role), CreatedAt: u.CreatedAt},
		Key:          api.NewKey{Key: api.Key{ID: k.Key.ID, User: u.ID, Name: k.Key.Name, CreatedAt: k.Key.CreatedAt}, Secret: k.Secret.Reveal()},
	}, nil
}

// PodmanEnv writes the podman driver's containers.conf and storage.conf
// into its state directory and returns the environment its podman runs
// with (berth admin podman-env).
func PodmanEnv(cfg Config) ([]string, error) {
	pc := PodmanConfig(cfg)
	if err := pc.WriteConfig(); err != nil {
		return nil, err
	}
	return pc.Env(), nil
}

// ImageCheckOptions are berth image check's: the purpose, an agent
// image's runner, how long each run may take.
type ImageCheckOptions = podman.CheckOptions

// CheckImage checks that an image in the podman driver's store keeps the
// contract of its purpose, an agent run's or an engineer sandbox's (berth
// image check): podman.Config.CheckImage, with the driver's configuration
// written first.
func CheckImage(ctx context.Context, cfg Config, image string, opts ImageCheckOptions) (podman.ImageCheck, error) {
	pc := PodmanConfig(cfg)
	if err := pc.WriteConfig(); err != nil {
		return podman.ImageCheck{}, err
	}
	return pc.CheckImage(ctx, image, opts)
}

// AgentNetwork is the podman driver's allowlist network as `berth admin
// agent-network` made it: runs on it reach Gateway:Port and nothing else.
type AgentNetwork struct {
	Name    string
	Gateway netip.Addr
	Port    int
}

// MakeAgentNetwork makes the allowlist network agent runs join on the
// bridge and subnet given, letting them reach the gateway's port (from
// BERTH_ADDR); with remove, it takes the network and its rules away.
func MakeAgentNetwork(ctx context.Context, cfg Config, bridge, subnet string, remove bool) (AgentNetwork, error) {
	if cfg.Driver != "podman" {
		return AgentNetwork{}, fmt.Errorf("BERTH_SANDBOX_DRIVER is %q; the allowlist network is the podman driver's", cfg.Driver)
	}
	port, err := strconv.Atoi(strings.TrimPrefix(portOf(cfg.Addr), ":"))
	if err != nil {
		return AgentNetwork{}, fmt.Errorf("BERTH_ADDR %q names no port", cfg.Addr)
	}
	a := podman.Allowlist{Bridge: bridge, Subnet: subnet, Port: port}
	pc := PodmanConfig(cfg)
	if err := pc.WriteConfig(); err != nil {
		return AgentNetwork{}, err
	}
	if remove {
		return AgentNetwork{}, pc.RemoveAllowlist(ctx, a)
	}
	if err := pc.CreateAllowlist(ctx, a); err != nil {
		return AgentNetwork{}, err
	}
	gw, _ := a.Gateway()
	return AgentNetwork{Name: pc.AgentNetworkName(), Gateway: gw, Port: port}, nil
}

// LocalForge is the local forge's directory of bare repositories (berth
// repo), when the gateway's forge is the local one.
func LocalForge(cfg Config) (*local.Forge, error) {
	if cfg.Forge != "local" {
		return nil, errors.New("the local forge is not configured: set BERTH_SANDBOX_GIT_FORGE=local")
	}
	return local.New(cfg.LocalRepos, cfg.SandboxPublicURL, nil, time.Now), nil
}

// BerthImage is berth's sandbox image, which berth image build copies
// berth-init from: BERTH_SANDBOX_INIT_IMAGE, else the one images/build
// makes.
func BerthImage(cfg Config) string {
	if cfg.InitImage != "" {
		return cfg.InitImage
	}
	return kubernetes.DefaultInitImage
}

// BuildImage builds a class image into the podman driver's store (berth
// image build): src's image with berth's layer on it, podman's progress
// written to log. On Kubernetes berth has no builder: the layer is
// printed for the cluster's own build instead (classimage.Plan).
func BuildImage(ctx context.Context, cfg Config, src classimage.Source, opts classimage.Options, log io.Writer) (classimage.Layer, error) {
	if cfg.Driver == "kubernetes" || cfg.Driver == "fake" {
		return classimage.Layer{}, fmt.Errorf("BERTH_SANDBOX_DRIVER is %q: berth builds images into the podman driver's store only; --print writes the Containerfile for the cluster's own build", cfg.Driver)
	}
	pc := PodmanConfig(cfg)
	if err := pc.WriteConfig(); err != nil {
		return classimage.Layer{}, err
	}
	return classimage.Make(ctx, pc.ImageBuilder(log), src, opts)
}
