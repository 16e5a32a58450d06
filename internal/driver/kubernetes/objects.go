package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/warm"
)

// objectName is a sandbox's Sandbox (and SandboxClaim) name: its id with
// the underscore, which names may not hold, made a hyphen. Ids are random,
// so names never collide across deployments.
func objectName(id sandbox.ID) string { return strings.ReplaceAll(string(id), "_", "-") }

// poolName is the SandboxTemplate and SandboxWarmPool name of an
// organisation's class: the class's name for people reading kubectl, and
// a hash of deployment and organisation so that two organisations' classes
// of one name, or two gateways' in one namespace, never meet. At most 55
// characters, so the pool's members (<pool>-xxxxx) stay under 63.
func (c Config) poolName(org, class string) string {
	h := sha256.Sum256([]byte(c.Deployment + "\x00" + org))
	return "berth-" + class + "-" + hex.EncodeToString(h[:4])
}

// labels are a sandbox's objects' labels (SPEC S11: owner, organisation,
// project); List and the reconciler find them by these.
func (c Config) labels(sb sandbox.Sandbox) map[string]string {
	return map[string]string{
		labelDeployment: c.Deployment, labelSandbox: string(sb.ID), labelOwner: sb.Owner,
		labelOrg: sb.Org, labelProject: sb.Project, labelPurpose: string(sb.Purpose), labelClass: sb.Class,
	}
}

func annotations(sb sandbox.Sandbox) map[string]string {
	return map[string]string{annotationOwner: sb.Owner, annotationName: sb.Name}
}

// SandboxObject is the Sandbox of a sandbox made without a pool: its pod
// carries the sandbox's environment (the key included: SPEC S11 puts it in
// the pod spec, not in a Secret), shutdownTime is its expiry, and an agent
// sandbox is deleted at expiry where an engineer's keeps its volume. With
// spec.Run it is an in-machine agent run's (runPod).
func SandboxObject(c Config, spec sandbox.Spec) Sandbox {
	c = c.withDefaults()
	sb := spec.Sandbox
	policy := policyRetain
	if sb.Purpose == sandbox.PurposeAgent {
		policy = policyDelete
	}
	var (
		pod  PodTemplate
		pvcs []PVCTemplate
	)
	if spec.Run != nil {
		pod = c.runPod(sb, spec.Env, *spec.Run)
	} else {
		pod, pvcs = c.pod(sb, spec.Env, sb.Purpose == sandbox.PurposeEngineer)
	}
	pod.Metadata.Labels = c.labels(sb)
	pod.Metadata.Annotations = annotations(sb)
	pod.Spec.Hostname = sb.Name
	return Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersionCore, Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(sb.ID), Namespace: c.Namespace, Labels: c.labels(sb), Annotations: annotations(sb),
		},
		Spec: SandboxSpec{
			PodTemplate: pod, VolumeClaimTemplates: pvcs,
			ShutdownTime: expiry(sb.ExpiresAt), ShutdownPolicy: policy, OperatingMode: modeRunning,
		},
	}
}

func expiry(at time.Time) *metav1.Time {
	if at.IsZero() {
		return nil
	}
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	return &t
}

// TemplateObject is the SandboxTemplate of a warm pool: a sandbox of the
// class with nothing of anybody's in it. Its pods wait, in berth-init, for
// the token a claim puts in their annotations, and fetch their
// environment from the gateway with it. The namespace's own NetworkPolicy
// (deploy/) governs them: the controller's managed policy would block
// cluster DNS and the gateway.
func TemplateObject(c Config, p warm.Pool) SandboxTemplate {
	c = c.withDefaults()
	sb := sandbox.Sandbox{
		Org: p.Org, Purpose: sandbox.PurposeEngineer, Class: p.Class.Name, Image: p.Class.Image,
		Isolation: p.Class.Isolation, Runtime: p.Runtime, CPU: p.Class.CPU, Memory: p.Class.Memory, Disk: p.Class.Disk,
	}
	env := map[string]string{
		"BERTH_BASE_URL": strings.TrimSuffix(c.PublicURL, "/"), "BERTH_SANDBOX_PURPOSE": string(sandbox.PurposeEngineer),
		"BERTH_SANDBOX_CLASS": p.Class.Name, envBootstrap: bootstrapFile,
	}
	// No readiness probe on sshd: a pool's pod is ready while it waits, or
	// the controller would never hand it out (nor keep it).
	pod, pvcs := c.pod(sb, env, false)
	pod.Metadata.Labels = c.poolLabels(p)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: "podinfo",
		VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		}}},
	})
	ctr := &pod.Spec.Containers[0]
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "podinfo", MountPath: podInfoDir, ReadOnly: true})
	return SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersionExtensions, Kind: "SandboxTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: c.poolName(p.Org, p.Class.Name), Namespace: c.Namespace, Labels: c.poolLabels(p)},
		Spec:       TemplateSpec{PodTemplate: pod, VolumeClaimTemplates: pvcs, NetworkPolicyManagement: "Unmanaged"},
	}
}

func (c Config) poolLabels(p warm.Pool) map[string]string {
	return map[string]string{labelDeployment: c.Deployment, labelOrg: p.Org, labelClass: p.Class.Name, labelPool: "true"}
}

// PoolObject is a class's SandboxWarmPool: warm ready sandboxes, replaced
// with the template's newest form only as they are claimed (SPEC S12:
// OnReplenish).
func PoolObject(c Config, p warm.Pool) SandboxWarmPool {
	c = c.withDefaults()
	name := c.poolName(p.Org, p.Class.Name)
	n := int32(p.Class.Warm)
	return SandboxWarmPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersionExtensions, Kind: "SandboxWarmPool"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.poolLabels(p)},
		Spec:       WarmPoolSpec{Replicas: &n, SandboxTemplateRef: LocalRef{Name: name}, UpdateStrategy: &UpdateStrategy{Type: "OnReplenish"}},
	}
}

// ClaimObject is the SandboxClaim that takes a sandbox from its class's
// pool. It sets neither env nor volume claim templates, either of which
// would cold-start a sandbox; what is the sandbox's own reaches the pod as
// the one-time token in its annotations. The pod gets annotations only:
// the controller refuses a claim whose pod labels are outside its label
// allowlist (by default sandbox.users.io alone), and checks annotations
// against its own system domains only. The claim carries berth's labels
// itself, which the controller neither checks nor copies to the Sandbox
// it binds (the driver labels that, bound). No lifecycle: the claim
// controller deletes the Sandbox at a claim's expiry, volume and all,
// where an engineer's expired sandbox keeps it, so the driver sets the
// expiry on the claimed Sandbox instead.
func ClaimObject(c Config, spec sandbox.Spec) SandboxClaim {
	c = c.withDefaults()
	sb := spec.Sandbox
	podAnnotations := annotations(sb)
	podAnnotations[annotationBootstrap] = spec.Bootstrap.Reveal()
	return SandboxClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersionExtensions, Kind: "SandboxClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(sb.ID), Namespace: c.Namespace, Labels: c.labels(sb), Annotations: annotations(sb),
		},
		Spec: ClaimSpec{
			WarmPoolRef:           LocalRef{Name: c.poolName(sb.Org, sb.Class)},
			AdditionalPodMetadata: &Meta{Annotations: podAnnotations},
		},
	}
}

// pod is the hardened pod every sandbox runs (SPEC S5): the image's
// non-root user, no privilege escalation, every capability dropped,
// seccomp RuntimeDefault, no service account token, the cluster's DNS
// explicitly, the tier's RuntimeClass, the class's resources as requests
// and limits, and HOME on a volume claim (a disk) or an 8Gi emptyDir. A
// pod that ends is not restarted: a finished sandbox has failed (S11).
func (c Config) pod(sb sandbox.Sandbox, env map[string]string, probeSSH bool) (PodTemplate, []PVCTemplate) {
	uid, no, yes := int64(sandboxUID), false, true
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(sb.CPU), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(sb.Memory), resource.BinarySI),
	}
	ctr := corev1.Container{
		Name:            "sandbox",
		Image:           sb.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env:             envVars(env),
		Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
		VolumeMounts:    []corev1.VolumeMount{{Name: "home", MountPath: sandboxHome}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
			AllowPrivilegeEscalation: &no, Privileged: &no,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: seccomp,
		},
	}
	if sb.Purpose == sandbox.PurposeEngineer {
		ctr.Ports = []corev1.ContainerPort{{Name: "ssh", ContainerPort: sshPort, Protocol: corev1.ProtocolTCP}}
	}
	if probeSSH {
		ctr.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(sshPort)}},
			PeriodSeconds: 2, FailureThreshold: 1,
		}
	}
	spec := corev1.PodSpec{
		Containers:                   []corev1.Container{ctr},
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		DNSPolicy:                    corev1.DNSClusterFirst,
		ServiceAccountName:           c.ServiceAccount,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: &yes, SeccompProfile: seccomp,
			// The kubelet's default (Always) makes every file of a claim
			// group-read-write at each mount, so a resumed sandbox's sshd
			// refuses its 0660 host key; once the volume's root is the
			// group's, leave the files as they are.
			FSGroupChangePolicy: &onRootMismatch,
		},
	}
	if sb.Runtime != "" {
		rt := sb.Runtime
		spec.RuntimeClassName = &rt
	}
	for _, s := range c.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	var pvcs []PVCTemplate
	if sb.Disk > 0 {
		// The controller adds the volume "home" for this template.
		pvc := PVCTemplate{
			Metadata: Meta{Name: "home"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: *resource.NewQuantity(int64(sb.Disk), resource.BinarySI),
				}},
			},
		}
		if c.StorageClass != "" {
			sc := c.StorageClass
			pvc.Spec.StorageClassName = &sc
		}
		pvcs = append(pvcs, pvc)
	} else {
		size := resource.MustParse(emptyHome)
		spec.Volumes = []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}}
	}
	return PodTemplate{Spec: spec}, pvcs
}

// runPod is the pod of an in-machine agent run (SPEC S13,
// RunSpec.InMachine): the runner's image under the hardening of every
// sandbox's pod, plus what podman's agent runs get (AgentArgs): a
// read-only root, and the only writable places emptyDirs that die with
// the pod: /work, the working directory, where berth-init clones through
// the gateway; /tmp; and HOME, where it writes the runner's files. No
// volume claim, whatever the class's disk: the checkout's work goes to the
// gateway with the exit report, or is lost with the run. The image's own entrypoint (berth-init) stays; run.Args
// fill its "$@". restartPolicy stays Never (pod): the agent's exit ends
// the run, which berth-init has reported to the gateway, and the
// controller marks the Sandbox Finished.
//
// A kelos image's run (S13.6) is on that interface's terms, as on podman:
// uid 61100 (and the volumes' group), the checkout at /workspace/repo,
// HOME as its environment says (/home/agent). The image is not changed and
// has no berth-init: an init container of InitImage, under the same
// hardening, copies berth-init and git-credential-berth into a volume of
// their own (initDir), which the run's container mounts read-only and
// runs berth-init from, with no arguments; berth-init (told by
// BERTH_RUN_CONTRACT) clones, fetches the task and runs the image's
// /kelos_entrypoint.sh with it as $1, so the task is in no object.
//
// The network is the namespace's NetworkPolicy (deploy/kubernetes), which
// selects every pod: "allowlist" (DNS and the gateway) needs nothing here.
// An "open" run gets nothing more either: a policy that opens egress for
// pods labelled berth.dev/purpose=agent belongs in deploy/'s extras.
func (c Config) runPod(sb sandbox.Sandbox, env map[string]string, run sandbox.RunSpec) PodTemplate {
	home := env["HOME"]
	if home == "" {
		// The image's passwd says /home/berth, but not every runtime sets
		// HOME from it, and berth-init needs HOME where the volume is.
		home = sandboxHome
		withHome := make(map[string]string, len(env)+1)
		maps.Copy(withHome, env)
		withHome["HOME"] = home
		env = withHome
	}
	sb.Disk = 0 // no claim: the home is one of the run's emptyDirs
	pod, _ := c.pod(sb, env, false)
	yes := true
	ctr := &pod.Spec.Containers[0]
	ctr.Args = slices.Clone(run.Args)
	ctr.WorkingDir = runWorkDir
	ctr.SecurityContext.ReadOnlyRootFilesystem = &yes
	ctr.VolumeMounts = nil
	pod.Spec.Volumes = nil
	kelosRun := run.Contract == sandbox.ContractKelos
	if kelosRun {
		ctr.WorkingDir = kelos.WorkDir
		uid := int64(kelos.UID)
		ctr.SecurityContext.RunAsUser, ctr.SecurityContext.RunAsGroup = &uid, &uid
		psc := pod.Spec.SecurityContext
		psc.RunAsUser, psc.RunAsGroup, psc.FSGroup = &uid, &uid, &uid
	}
	volumes := []struct{ name, path, size string }{
		{"work", ctr.WorkingDir, emptyHome}, {"tmp", "/tmp", runTmp}, {"home", home, runHome},
	}
	if kelosRun {
		volumes = append(volumes, struct{ name, path, size string }{"berth", initDir, initSize})
	}
	for _, v := range volumes {
		size := resource.MustParse(v.size)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name: v.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}},
		})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.path, ReadOnly: v.name == "berth"})
	}
	if kelosRun {
		ctr.Command = []string{initDir + "/berth-init"}
		init := corev1.Container{
			Name:            "berth-init",
			Image:           c.InitImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			// -P keeps git-credential-berth the link to berth-init it is.
			Command:         []string{"cp", "-P", initFrom + "/berth-init", initFrom + "/git-credential-berth", initDir + "/"},
			Resources:       ctr.Resources,
			VolumeMounts:    []corev1.VolumeMount{{Name: "berth", MountPath: initDir}},
			SecurityContext: ctr.SecurityContext.DeepCopy(),
		}
		pod.Spec.InitContainers = []corev1.Container{init}
	}
	return pod
}

// envVars is env sorted by name, so objects are the same every time.
func envVars(env map[string]string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}
