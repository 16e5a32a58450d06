// Package kubernetes is the cluster sandbox driver (SPEC S5, S11, S12):
// every sandbox is one agent-sandbox Sandbox (agents.x-k8s.io/v1beta1) in
// the sandbox namespace, made directly or claimed from its class's warm
// pool (a SandboxTemplate and a SandboxWarmPool per class, a SandboxClaim
// per sandbox). It talks to the API server through client-go's dynamic
// client with the few fields it uses declared here (types.go), drives the
// agent-sandbox controller and is not one: the controller makes the pods,
// enforces shutdownTime and keeps the pools filled.
//
// Agent runs (SPEC S13) run whole in their pod (sandbox.InMachineRuns):
// a pod can mount no checkout of the gateway's, and the gateway follows
// no pod's output, so berth-init clones through the gateway, fetches the
// task, streams the agent's output there and reports the exit with the
// agent's work as a git bundle, which the gateway lands after a clean run
// (the pod's key pushes nothing). A kelos image (S13.6), which has no
// berth-init, runs unchanged: an init container copies berth-init from
// berth's own image (Config.InitImage) into a volume of the pod's, and
// berth-init wraps the image's entrypoint. Runs that need the host's
// checkout, and contracts berth does not know, are refused
// (fault.Unavailable).
//
// What it writes is built by pure functions (objects.go) and checked by
// golden files; integration tests run it against a real kube-apiserver
// (kubernetes_test.go).
package kubernetes

import (
	"context"
	"net"
	"time"
)

// Config is the driver's settings.
type Config struct {
	// Namespace holds the sandboxes, their pools and claims
	// (BERTH_SANDBOX_NAMESPACE); "" is "default".
	Namespace string
	// Deployment tells this gateway's objects from another's in the same
	// namespace: the value of every object's berth.dev/deployment label.
	Deployment string
	// StorageClass is the class of a sandbox's home volume claim
	// (BERTH_SANDBOX_STORAGE_CLASS); "" is the cluster's default.
	StorageClass string
	// ServiceAccount is the sandboxes' pods' (BERTH_SANDBOX_SERVICE_ACCOUNT);
	// its token is never mounted.
	ServiceAccount string
	// ImagePullSecrets name the secrets the sandboxes' images are pulled
	// with (BERTH_SANDBOX_IMAGE_PULL_SECRETS). The gateway never reads them.
	ImagePullSecrets []string
	// PublicURL is the gateway as a sandbox reaches it: a warm pool's
	// sandboxes fetch their environment there once claimed.
	PublicURL string
	// InitImage is the image a kelos image's pod takes berth-init from
	// (BERTH_SANDBOX_INIT_IMAGE); "" is DefaultInitImage. The kelos image
	// runs unchanged and has no berth-init, so an init container copies
	// this image's /usr/local/bin/berth-init and git-credential-berth
	// into a volume of the pod's, with cp. It is berth's sandbox image,
	// not the gateway's, which has no berth-init: the image engineer
	// sandboxes pull already, built from the same tree as the gateway,
	// so its berth-init speaks the gateway's routes.
	InitImage string
	// ReadyTimeout bounds the wait for a sandbox to be ready; 0 means 5
	// minutes (an image pull comes first).
	ReadyTimeout time.Duration
	// Dial reaches a pod's sshd to see it greet; nil is a plain dialer.
	// Tests point it at a stand-in.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// The image contract (images/build), as podman runs it.
const (
	sandboxUID  = 1001
	sandboxHome = "/home/berth"
	sshPort     = 2222
)

// Ports a sandbox's pod lets the gateway reach (SPEC S10, S11).
const (
	portLo = 1024
	portHi = 65535
)

// emptyHome is the size of a home without a disk (SPEC S11), and of an
// agent run's checkout.
const emptyHome = "8Gi"

// An in-machine agent run's writable places besides its checkout, sized as
// podman's tmpfs mounts for agent runs (podman.AgentHardening), and where
// its checkout is (the working directory, as on podman).
const (
	runWorkDir = "/work"
	runTmp     = "512Mi"
	runHome    = "1Gi"
)

// DefaultInitImage is InitImage's default: the sandbox image images/build
// makes.
const DefaultInitImage = "localhost/berth-sandbox:latest"

// Where a kelos image's pod has berth-init: a volume of its own, filled
// by the init container from InitImage's initFrom and mounted read-only
// into the run's container, and its size.
const (
	initDir  = "/berth"
	initFrom = "/usr/local/bin"
	initSize = "64Mi"
)

// Labels and annotations on every object the driver makes.
const (
	labelDeployment = "berth.dev/deployment"
	labelSandbox    = "berth.dev/sandbox"
	labelOwner      = "berth.dev/owner"
	labelOrg        = "berth.dev/org"
	labelProject    = "berth.dev/project"
	labelPurpose    = "berth.dev/purpose"
	labelClass      = "berth.dev/class"
	labelPool       = "berth.dev/pool"

	annotationOwner = "berth.dev/owner"
	annotationName  = "berth.dev/name"
	// annotationBootstrap carries a claimed sandbox's one-time token to its
	// pod, where berth-init reads it through the downward API.
	annotationBootstrap = "berth.dev/bootstrap-token"
)

// Where a pool sandbox's pod sees its own annotations (downward API), and
// the variable that tells berth-init to wait there for its token.
const (
	podInfoDir    = "/etc/berth/pod"
	bootstrapFile = podInfoDir + "/annotations"
	envBootstrap  = "BERTH_BOOTSTRAP_FILE"
)

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.Deployment == "" {
		c.Deployment = "berth"
	}
	if c.InitImage == "" {
		c.InitImage = DefaultInitImage
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 5 * time.Minute
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	}
	return c
}
