package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var pvcGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// podVolume is one of a pod's volumes as set up on the host.
type podVolume struct {
	path string
	ro   bool // mounted read-only whatever the mount says (downward API)
	// downward is the volume's items, rewritten as the pod's metadata
	// changes; written holds what each file has now.
	downward *corev1.DownwardAPIVolumeSource
	written  map[string]string
}

// setupVolumes makes the pod's volumes, as a kubelet's volume plugins do
// before any container starts:
//
//   - emptyDir: a directory of the pod's own under the server's scratch
//     directory, mode 0777 (medium Memory: a tmpfs mounted there, whose
//     root is 1777), shared by the pod's init and main containers and
//     removed with the pod;
//   - persistentVolumeClaim: a podman named volume per namespace and
//     claim (kubetest-<server>_<namespace>_<claim>), made at its first use
//     and kept across pods until Stop. The claim must exist; it is used
//     unbound (no PersistentVolume, no provisioner). Its directory is
//     bind-mounted, so podman neither copies the image's files into it
//     nor chowns it (a kubelet does neither): a fresh volume's root is
//     root's, 0755, as a fresh filesystem's is;
//   - downwardAPI: files in a directory of the pod's, mounted read-only
//     (writeDownward).
//
// With fsGroup set, emptyDir and claim volumes get the kubelet's
// ownership change (setOwnership): group fsGroup, group read-write, and
// setgid directories, so the container's user (who has fsGroup as a
// supplementary group) can write them. It is not podman's :U, which
// would make the user their owner: a real node does not.
func (p *podRunner) setupVolumes(ctx context.Context, pod *corev1.Pod, r *podRun) error {
	var fsGroup *int64
	var policy *corev1.PodFSGroupChangePolicy
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup, policy = sc.FSGroup, sc.FSGroupChangePolicy
	}
	if err := checkVolumes(pod); err != nil {
		return err
	}
	vols := map[string]*podVolume{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			pv := &podVolume{path: dir}
			if err := mkdirMode(dir, 0o777); err != nil {
				return err
			}
			if v.EmptyDir.Medium == corev1.StorageMediumMemory && !slices.Contains(r.tmpfs, dir) {
				var size int64
				if v.EmptyDir.SizeLimit != nil {
					size = v.EmptyDir.SizeLimit.Value()
				}
				if err := mountTmpfs(dir, size); err != nil {
					return fmt.Errorf("emptyDir %s: %w", v.Name, err)
				}
				p.mu.Lock()
				r.tmpfs = append(r.tmpfs, dir)
				p.mu.Unlock()
			}
			if fsGroup != nil {
				if err := setOwnership(dir, *fsGroup, nil); err != nil {
					return err
				}
			}
			vols[v.Name] = pv
		case v.PersistentVolumeClaim != nil:
			path, err := p.claimVolume(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return err
			}
			if fsGroup != nil {
				if err := setOwnership(path, *fsGroup, policy); err != nil {
					return err
				}
			}
			vols[v.Name] = &podVolume{path: path, ro: v.PersistentVolumeClaim.ReadOnly}
		case v.DownwardAPI != nil:
			if err := mkdirMode(dir, 0o755); err != nil {
				return err
			}
			vols[v.Name] = &podVolume{path: dir, ro: true, downward: v.DownwardAPI, written: map[string]string{}}
		}
	}
	p.mu.Lock()
	r.volumes = vols
	p.mu.Unlock()
	return p.writeDownward(pod, r)
}

// checkVolumes refuses, before anything is made, the volumes the
// stand-in does not set up.
func checkVolumes(pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			if m := v.EmptyDir.Medium; m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory {
				return configErr("volume %s: emptyDir medium %q is not supported", v.Name, m)
			}
		case v.PersistentVolumeClaim != nil:
		case v.DownwardAPI != nil:
			for _, it := range v.DownwardAPI.Items {
				if it.ResourceFieldRef != nil || it.FieldRef == nil {
					return configErr("volume %s: item %s: only fieldRef items are supported", v.Name, it.Path)
				}
				if _, err := fieldValue(pod, it.FieldRef.FieldPath); err != nil {
					return configErr("volume %s: item %s: %v", v.Name, it.Path, err)
				}
			}
		default:
			return configErr("volume %s: only emptyDir, persistentVolumeClaim and downwardAPI volumes are supported", v.Name)
		}
	}
	return nil
}

// mkdirMode makes dir with exactly mode, whatever the umask.
func mkdirMode(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// claimVolume is the host directory of the podman volume behind a
// namespace's claim, made at its first use.
func (p *podRunner) claimVolume(ctx context.Context, ns, claim string) (string, error) {
	if _, err := p.dc.Resource(pvcGVR).Namespace(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			// The pod waits for it, and is tried again.
			return "", fmt.Errorf("persistentvolumeclaim %q not found", claim)
		}
		return "", err
	}
	name := prefix + p.server + "_" + ns + "_" + claim
	p.mu.Lock()
	path, ok := p.claims[name]
	p.mu.Unlock()
	if ok {
		return path, nil
	}
	_, err := p.pm.run(ctx, nil, "volume", "create", "--label", labelServer+"="+p.server,
		"--label", labelNamespace+"="+ns, "--label", labelClaim+"="+claim, name)
	var pe *podmanError
	if err != nil && !(errors.As(err, &pe) && strings.Contains(pe.stderr, "already exists")) {
		return "", err
	}
	out, err := p.pm.run(ctx, nil, "volume", "inspect", "--format", "{{.Mountpoint}}", name)
	if err != nil {
		return "", err
	}
	path = strings.TrimSpace(out)
	p.mu.Lock()
	p.claims[name] = path
	p.mu.Unlock()
	return path, nil
}

// setOwnership changes a volume as the kubelet does for a pod's fsGroup:
// every file and directory gets group fsGroup and group read-write,
// directories also group search and setgid (symlinks only their group).
// With policy OnRootMismatch it does nothing when the root already has
// them; otherwise (Always, the default) it walks the whole volume at
// every mount, so a 0600 file becomes 0660.
func setOwnership(dir string, fsGroup int64, policy *corev1.PodFSGroupChangePolicy) error {
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch && ownedBy(dir, fsGroup) {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(fsGroup)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode() | 0o660
		if d.IsDir() {
			mode |= 0o110 | fs.ModeSetgid
		}
		return os.Chmod(path, mode)
	})
}

// ownedBy reports whether dir's root already has what setOwnership gives.
func ownedBy(dir string, fsGroup int64) bool {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return false
	}
	gid, ok := fileGID(info)
	return ok && gid == fsGroup && info.Mode().Perm()&0o770 == 0o770 && info.Mode()&fs.ModeSetgid != 0
}

// writeDownward writes each downward-API file whose content changed, the
// way a kubelet's atomic writer makes a change appear at once: a new
// file in the same directory, renamed over the old one (the directory is
// what is mounted, so the container sees the rename).
func (p *podRunner) writeDownward(pod *corev1.Pod, r *podRun) error {
	for _, name := range slices.Sorted(maps.Keys(r.volumes)) {
		v := r.volumes[name]
		if v.downward == nil {
			continue
		}
		for _, it := range v.downward.Items {
			content, err := fieldValue(pod, it.FieldRef.FieldPath)
			if err != nil {
				return configErr("volume %s: item %s: %v", name, it.Path, err)
			}
			if w, ok := v.written[it.Path]; ok && w == content {
				continue
			}
			mode := fs.FileMode(0o644)
			if it.Mode != nil {
				mode = fs.FileMode(*it.Mode)
			} else if v.downward.DefaultMode != nil {
				mode = fs.FileMode(*v.downward.DefaultMode)
			}
			if err := writeAtomic(v.path, it.Path, []byte(content), mode); err != nil {
				return err
			}
			v.written[it.Path] = content
		}
	}
	return nil
}

func writeAtomic(dir, rel string, b []byte, mode fs.FileMode) error {
	if !filepath.IsLocal(rel) {
		return configErr("downward API path %q leaves its volume", rel)
	}
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), mode)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// fieldValue is a downward-API field of the pod, in the kubelet's format:
// maps as one key="value" line per entry, sorted by key, the value
// quoted as Go's %q, lines joined by a newline with none after the last.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	if base, key, ok := subscript(path); ok {
		switch base {
		case "metadata.annotations":
			return pod.Annotations[key], nil
		case "metadata.labels":
			return pod.Labels[key], nil
		}
		return "", fmt.Errorf("fieldPath %q is not supported", path)
	}
	switch path {
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	return "", fmt.Errorf("fieldPath %q is not supported", path)
}

// subscript splits metadata.annotations['key'].
func subscript(path string) (base, key string, ok bool) {
	base, rest, ok := strings.Cut(path, "['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", "", false
	}
	return base, strings.TrimSuffix(rest, "']"), true
}

func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// mounts resolves c's volume mounts to host directories.
func mounts(c *corev1.Container, vols map[string]*podVolume) ([]hostMount, error) {
	if len(c.VolumeDevices) > 0 {
		return nil, configErr("container %s: volumeDevices are not supported", c.Name)
	}
	var out []hostMount
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return nil, configErr("container %s: volume mount %s names no volume of the pod", c.Name, m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, configErr("container %s: volume mount %s: subPath is not supported", c.Name, m.Name)
		}
		out = append(out, hostMount{src: v.path, dst: m.MountPath, ro: m.ReadOnly || v.ro})
	}
	return out, nil
}
