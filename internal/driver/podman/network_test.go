package podman_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/driver/podman"
)

// TestAllowlistReachesTheGatewayOnly puts a container on an allowlist
// network and checks what it can open: the gateway's port on the host
// yes; another host port, another address, a peer, DNS: no.
func TestAllowlistReachesTheGatewayOnly(t *testing.T) {
	root := podmanRoot(t)
	if os.Geteuid() != 0 {
		t.Skip("the allowlist's rules need root (iptables)")
	}
	listen := func() (net.Listener, int) {
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln, ln.Addr().(*net.TCPAddr).Port
	}
	_, gateway := listen()
	_, other := listen()

	cfg := podman.Config{StateDir: root}
	a := podman.Allowlist{Name: "berth-test-allowlist", Bridge: "berthtest0", Subnet: "10.89.77.0/24", Port: gateway}
	ctx := context.Background()
	if err := cfg.CreateAllowlist(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cfg.RemoveAllowlist(context.Background(), a); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	// Again: idempotent.
	if err := cfg.CreateAllowlist(ctx, a); err != nil {
		t.Fatalf("create again: %v", err)
	}

	podmanCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command("podman", args...)
		cmd.Env = append(cfg.Env(), "CONTAINERS_CONF="+root+"/containers.conf")
		return cmd
	}
	// A peer to try to reach, listening on the same bridge.
	peer := "berth-test-peer-" + strconv.Itoa(os.Getpid())
	if out, err := podmanCmd("run", "-d", "--rm", "--name", peer, "--network", a.Name, "--entrypoint", "git", testImage,
		"daemon", "--listen=0.0.0.0", "--port=9418", "--base-path=/tmp", "--reuseaddr").CombinedOutput(); err != nil {
		t.Fatalf("peer: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = podmanCmd("rm", "-f", "-t", "0", peer).Run() })
	ip, err := podmanCmd("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", peer).Output()
	if err != nil {
		t.Fatal(err)
	}

	// The peer listens: the host reaches it, so a run that cannot is held
	// back by the rules, not by an empty port.
	peerAddr := net.JoinHostPort(strings.TrimSpace(string(ip)), "9418")
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", peerAddr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i == 50 {
			t.Fatalf("the host cannot reach the peer at %s: %v", peerAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Each probe prints its name when the connection opens.
	probe := func(name, host string, port int) string {
		return "(timeout 3 bash -c 'exec 3<>/dev/tcp/" + host + "/" + strconv.Itoa(port) + "' 2>/dev/null && echo " + name + ");"
	}
	script := probe("gateway", "host.containers.internal", gateway) +
		probe("other-port", "host.containers.internal", other) +
		probe("outside", "1.1.1.1", 443) +
		probe("peer", strings.TrimSpace(string(ip)), 9418) +
		"(timeout 3 getent hosts example.com >/dev/null && echo dns); true"
	out, err := podmanCmd("run", "--rm", "--network", a.Name, "--entrypoint", "bash", testImage, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v: %s", err, out)
	}
	got := strings.Fields(string(out))
	if strings.Join(got, " ") != "gateway" {
		t.Errorf("from the allowlist network the run reached %q; want only the gateway", got)
	}
}
