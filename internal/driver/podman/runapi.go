package podman

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// `podman run --detach` through the podman service: the container is
// made (POST /containers/create) and started (POST .../start) by the
// service berth already runs, which saves the binary's start-up, some
// 20–30 ms of every create here. The argv RunArgs and AgentArgs build
// stays the one description of a machine (and its golden files the
// review of its hardening): runSpec reads that argv back into the
// service's container spec, flag by flag, and a flag it does not know
// sends the run to the binary, never to a spec that would lack it.
// TestServiceRunMatchesTheBinary makes the same machines both ways with
// the real podman and compares what podman says of each.
//
// The environment goes in the request's body, over the service's socket
// in the gateway's 0700 state directory: no env file is written.

// runSpec is the service's container spec (podman 4's SpecGenerator, as
// JSON) for args, a `podman run` argv of the driver's own, with env as the
// container's environment (the values --env-file and --env name in args).
// ok is false when args holds anything it does not translate.
func runSpec(args []string, env map[string]string) (spec map[string]any, ok bool) {
	if len(args) < 2 || args[0] != "run" {
		return nil, false
	}
	spec = map[string]any{}
	labels := map[string]string{}
	limits := map[string]any{}
	var mounts, volumes []map[string]any
	readOnly := false
	i := 1
	next := func() (string, bool) {
		if i+1 >= len(args) {
			return "", false
		}
		i++
		return args[i], true
	}
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		flag := args[i]
		switch flag {
		case "--detach":
			continue // the service's start never waits for the container
		case "--read-only":
			spec["read_only_filesystem"] = true
			readOnly = true
			continue
		}
		v, ok := next()
		if !ok {
			return nil, false
		}
		switch flag {
		case "--name":
			spec["name"] = v
		case "--hostname":
			spec["hostname"] = v
		case "--label":
			k, val, ok := strings.Cut(v, "=")
			if !ok {
				return nil, false
			}
			labels[k] = val
		case "--user":
			spec["user"] = v
		case "--cap-drop":
			spec["cap_drop"] = append(asStrings(spec["cap_drop"]), v)
		case "--security-opt":
			if v != "no-new-privileges" {
				return nil, false
			}
			spec["no_new_privileges"] = true
		case "--pids-limit":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, false
			}
			limits["pids"] = map[string]any{"limit": n}
		case "--memory":
			n, err := strconv.ParseInt(strings.TrimSuffix(v, "b"), 10, 64)
			if err != nil || !strings.HasSuffix(v, "b") {
				return nil, false
			}
			// As the binary: swap as much again as memory.
			limits["memory"] = map[string]any{"limit": n, "swap": 2 * n}
		case "--cpus":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return nil, false
			}
			const period = 100000
			limits["cpu"] = map[string]any{"quota": int64(math.Round(f * period)), "period": period}
		case "--stop-timeout":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, false
			}
			spec["stop_timeout"] = n
		case "--volume":
			parts := strings.Split(v, ":")
			if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
				return nil, false
			}
			var opts []string
			if len(parts) == 3 {
				if parts[2] != "ro" {
					return nil, false
				}
				opts = []string{"ro"}
			}
			if strings.HasPrefix(parts[0], "/") {
				mounts = append(mounts, map[string]any{"type": "bind", "source": parts[0], "destination": parts[1], "options": orNone(opts)})
			} else {
				volumes = append(volumes, map[string]any{"Name": parts[0], "Dest": parts[1], "Options": orNone(opts)})
			}
		case "--tmpfs":
			dest, opts, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(dest, "/") {
				return nil, false
			}
			mounts = append(mounts, map[string]any{"type": "tmpfs", "source": "tmpfs", "destination": dest, "options": orNone(strings.Split(opts, ","))})
		case "--workdir":
			spec["work_dir"] = v
		case "--entrypoint":
			spec["entrypoint"] = []string{v}
		case "--runtime":
			// podman 4's service runs every container on its own
			// runtime: the spec's is not read (a test saw runc where
			// runsc was asked). The binary takes it.
			return nil, false
		case "--network":
			spec["netns"] = map[string]any{"nsmode": "bridge"}
			spec["Networks"] = map[string]any{v: map[string]any{}}
		case "--env-file", "--env":
			// Their values are env's, sent whole below.
		default:
			return nil, false
		}
	}
	if i >= len(args) {
		return nil, false // no image
	}
	spec["image"] = args[i]
	if cmd := args[i+1:]; len(cmd) > 0 {
		spec["command"] = cmd
	}
	if len(labels) > 0 {
		spec["labels"] = labels
	}
	if len(limits) > 0 {
		spec["resource_limits"] = limits
	}
	if readOnly {
		// The binary's --read-only-tmpfs, on by default: /run, /tmp and
		// /var/tmp stay writable, each a tmpfs unless mounted otherwise.
		for _, dir := range []string{"/run", "/tmp", "/var/tmp"} {
			if !slices.ContainsFunc(mounts, func(m map[string]any) bool { return m["destination"] == dir }) {
				mounts = append(mounts, map[string]any{"type": "tmpfs", "source": "tmpfs", "destination": dir,
					"options": []string{"rw", "rprivate", "nosuid", "nodev", "tmpcopyup"}})
			}
		}
	}
	if len(mounts) > 0 {
		spec["mounts"] = mounts
	}
	// As the binary: sd_notify handled by the container itself.
	spec["sdnotifyMode"] = "container"
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	if len(env) > 0 {
		spec["env"] = env
	}
	return spec, true
}

func asStrings(v any) []string {
	s, _ := v.([]string)
	return s
}

// orNone is opts, or an empty list rather than JSON's null.
func orNone(opts []string) []string {
	if opts == nil {
		return []string{}
	}
	return opts
}

// serviceRun is `podman run --detach` of args through the service, env
// the container's whole environment. ok is false when the service does
// not answer or args cannot be translated: the binary runs it then. A
// refusal comes back as the binary's would (a *podmanError saying
// podman's words), so that the callers' checks of it hold.
func (d *Driver) serviceRun(ctx context.Context, args []string, env map[string]string) (ok bool, err error) {
	svc := d.service()
	if svc == nil {
		return false, nil
	}
	spec, ok := runSpec(args, env)
	if !ok {
		return false, nil // a runtime of its own (the isolated tier): the binary runs it
	}
	name, _ := spec["name"].(string)
	if _, err := svc.call(ctx, http.MethodPost, "/containers/create", spec); err != nil {
		return refused(err)
	}
	if _, err := svc.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/start", nil); err != nil {
		return refused(err)
	}
	return true, nil
}

// refused is serviceRun's answer to a call that failed: podman's refusal
// as the binary's error, or ok false when the service did not answer at
// all (nothing was made: a create that never arrived; a start that never
// arrived leaves a container the caller's clean-up removes, as after a
// failed run of the binary).
func refused(err error) (bool, error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		return false, nil
	}
	return true, &podmanError{args: []string{"run"}, err: fmt.Errorf("the podman service answered %d", ae.status), stderr: "Error: " + ae.msg}
}
