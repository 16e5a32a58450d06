package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// gatewayImage is what images/build gateway makes (make images builds it).
const gatewayImage = "localhost/berth:latest"

// TestGatewayImage runs the gateway's own image as a deployment would
// (deploy/kubernetes/gateway.yaml): bootstrapped and served from its data
// volume, as its unprivileged uid, reachable on its port, answering the
// CLI with the operator's key.
func TestGatewayImage(t *testing.T) {
	root := podmanRoot(t)
	if !imageBuilt(root, gatewayImage) {
		t.Skipf("%s is not built (images/build gateway, or make images)", gatewayImage)
	}
	podman := func(args ...string) (string, error) {
		out, err := podmanOn(root, args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "berth-e2e-gateway-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if out, err := podman("rm", "-f", "-t", "0", name); err != nil {
			t.Errorf("podman rm: %v: %s", err, out)
		}
		if out, err := podman("volume", "rm", "-f", name); err != nil {
			t.Errorf("podman volume rm: %v: %s", err, out)
		}
	})
	run := []string{"--network", "host", "-v", name + ":/var/lib/berth"}

	out, err := podman(append(append([]string{"run", "--rm"}, run...), gatewayImage, "admin", "bootstrap")...)
	if err != nil {
		t.Fatalf("berth admin bootstrap in the image: %v: %s", err, out)
	}
	key := regexp.MustCompile(`berth_[A-Za-z0-9_]+`).FindString(out)
	if key == "" {
		t.Fatalf("bootstrap printed no key:\n%s", out)
	}

	port := freePort(t)
	url := "http://127.0.0.1:" + port
	if out, err := podman(append(append([]string{"run", "-d", "--name", name, "-e", "BERTH_ADDR=127.0.0.1:" + port}, run...), gatewayImage)...); err != nil {
		t.Fatalf("podman run %s: %v: %s", gatewayImage, err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			logs, _ := podman("logs", name)
			t.Fatalf("the gateway in %s never answered /healthz: %v\n%s", gatewayImage, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if uid, err := podman("exec", name, "id", "-u"); err != nil || uid != "65532" {
		t.Errorf("the gateway runs as uid %q (%v), want its own 65532", uid, err)
	}
	whoami := exec.Command(berthBin, "whoami", "--url", url)
	whoami.Env = append(os.Environ(), "BERTH_API_KEY="+key, "HOME="+t.TempDir())
	got, err := whoami.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "operator") {
		t.Errorf("berth whoami against the image's gateway: %v\n%s", err, got)
	}
}
