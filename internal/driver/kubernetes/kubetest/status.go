package kubetest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// status is the pod's status as the runner sees it, made from the
// pod's last status so that what the runner does not own (PodScheduled,
// qosClass) stays and a condition's lastTransitionTime moves only when
// it changes. Called with podRunner.mu held.
func (r *podRun) status(pod *corev1.Pod) corev1.PodStatus {
	old := pod.Status
	st := *old.DeepCopy()
	st.HostIP, st.HostIPs = nodeIP, []corev1.HostIP{{IP: nodeIP}}
	start := r.startTime
	st.StartTime = &start
	if r.ip != "" {
		// Kept once the containers end, as a terminated pod keeps its IP.
		st.PodIP, st.PodIPs = r.ip, []corev1.PodIP{{IP: r.ip}}
	}

	var incomplete []string
	initFailed := false
	st.InitContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := r.containerStatus(c, "PodInitializing")
		cr := r.ctrs[c.Name]
		switch {
		case cr != nil && cr.done && cr.exitCode == 0:
			cs.Ready = true
		case cr != nil && cr.done:
			initFailed = true
			incomplete = append(incomplete, c.Name)
		default:
			incomplete = append(incomplete, c.Name)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	waiting := "ContainerCreating"
	if len(incomplete) > 0 {
		waiting = "PodInitializing"
	}
	var unready []string
	made, ended, failed := 0, 0, false
	st.ContainerStatuses = nil
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := r.containerStatus(c, waiting)
		if cr := r.ctrs[c.Name]; cr != nil {
			made++
			if cr.done {
				ended++
				failed = failed || cr.exitCode != 0
			}
		}
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	n := len(pod.Spec.Containers)
	switch {
	case initFailed || (n > 0 && ended == n && failed):
		st.Phase = corev1.PodFailed
	case n > 0 && ended == n:
		st.Phase = corev1.PodSucceeded
	case n > 0 && made == n:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}

	sandbox := r.sandboxErr == "" && r.volumes != nil
	setCondition(&st, old, corev1.PodReadyToStartContainers, sandbox, "", "")
	if len(incomplete) > 0 {
		setCondition(&st, old, corev1.PodInitialized, false, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	} else {
		setCondition(&st, old, corev1.PodInitialized, true, "", "")
	}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		switch {
		case st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed:
			setCondition(&st, old, t, false, "PodCompleted", "")
		case len(unready) > 0:
			setCondition(&st, old, t, false, "ContainersNotReady",
				fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " ")))
		default:
			setCondition(&st, old, t, true, "", "")
		}
	}
	return st
}

// containerStatus is one container's status; waiting is the reason it
// waits for when nothing went wrong.
func (r *podRun) containerStatus(c *corev1.Container, waiting string) corev1.ContainerStatus {
	no, yes := false, true
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: &no}
	cr := r.ctrs[c.Name]
	if cr == nil {
		w := waitState{reason: waiting, message: r.sandboxErr}
		if ws, ok := r.waiting[c.Name]; ok {
			w = ws
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}
		return cs
	}
	cs.ContainerID, cs.ImageID = "podman://"+cr.id, cr.imageID
	switch {
	case cr.done:
		cs.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: cr.exitCode, Reason: cr.reason, Message: cr.message,
			StartedAt: cr.startedAt, FinishedAt: cr.finishedAt, ContainerID: cs.ContainerID,
		}
	case cr.startedAt.IsZero():
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	default:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: cr.startedAt}
		cs.Started, cs.Ready = &yes, cr.ready
	}
	return cs
}

// setCondition sets a condition of st, keeping its lastTransitionTime
// from old when its status is unchanged.
func setCondition(st *corev1.PodStatus, old corev1.PodStatus, t corev1.PodConditionType, ok bool, reason, msg string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now()}
	for _, o := range old.Conditions {
		if o.Type == t && o.Status == status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// probe runs a container's tcpSocket readiness probe while it runs, at
// the probe's period, as a kubelet's prober does: ready after
// successThreshold passes in a row, unready after failureThreshold
// failures; the pod is queued at each change.
func (p *podRunner) probe(r *podRun, cr *ctrRun, c *corev1.Container) {
	pr := c.ReadinessProbe
	period := secondsOr(pr.PeriodSeconds, 10)
	timeout := secondsOr(pr.TimeoutSeconds, 1)
	success, failure := orDefault(pr.SuccessThreshold, 1), orDefault(pr.FailureThreshold, 3)
	port, portErr := probePort(pr.TCPSocket.Port, c)
	p.wg.Go(func() {
		delay := time.Duration(pr.InitialDelaySeconds) * time.Second
		passes, fails := 0, 0
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = period
			p.mu.Lock()
			ip, done, ready := r.ip, cr.done, cr.ready
			p.mu.Unlock()
			if done {
				return
			}
			ok := false
			if portErr == nil && ip != "" {
				host := ip
				if pr.TCPSocket.Host != "" {
					host = pr.TCPSocket.Host
				}
				d := net.Dialer{Timeout: timeout}
				if conn, err := d.DialContext(r.ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
					conn.Close()
					ok = true
				}
			}
			if ok {
				passes, fails = passes+1, 0
			} else {
				passes, fails = 0, fails+1
			}
			now := ready
			switch {
			case !ready && passes >= success:
				now = true
			case ready && fails >= failure:
				now = false
			}
			if now != ready {
				p.mu.Lock()
				if !cr.done {
					cr.ready = now
				}
				p.mu.Unlock()
				p.enqueue(r.key)
			}
		}
	})
}

func probePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

func secondsOr(n, def int32) time.Duration { return time.Duration(orDefault(n, def)) * time.Second }

func orDefault(n, def int32) int {
	if n <= 0 {
		return int(def)
	}
	return int(n)
}
