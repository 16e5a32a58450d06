package podman

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Allowlist is the network agent runs join by default (SPEC S13): it
// reaches the gateway's port on this host and nothing else: no route out,
// no DNS, no other host service, no other sandbox (notes/podman.md §4).
//
// An internal podman network alone is not that: every host service on the
// bridge address and every peer on the bridge stays reachable. So the
// network is written by hand with a pinned bridge name, and iptables rules
// name that bridge: input from it may reach only the gateway's port, and
// nothing is forwarded from it.
type Allowlist struct {
	// Name is the podman network's name (default berth-agents).
	Name string
	// Bridge is the bridge interface (default berth0; at most 15 bytes).
	Bridge string
	// Subnet is the network's IPv4 subnet (default 10.89.78.0/24); the
	// gateway sees runs come from its first address.
	Subnet string
	// Port is the gateway's TCP port on this host: the one thing a run
	// may reach.
	Port int
}

func (a Allowlist) withDefaults() Allowlist {
	if a.Name == "" {
		a.Name = DefaultAgentNetwork
	}
	if a.Bridge == "" {
		a.Bridge = "berth0"
	}
	if a.Subnet == "" {
		a.Subnet = "10.89.78.0/24"
	}
	return a
}

// chain is the iptables chain holding the network's input rules.
func (a Allowlist) chain() string { return "BERTH-" + strings.ToUpper(a.Bridge) }

// netavarkNetwork is the network file podman reads from
// network_config_dir; podman 4.3 cannot name the bridge from its command
// line.
type netavarkNetwork struct {
	Name             string            `json:"name"`
	ID               string            `json:"id"`
	Driver           string            `json:"driver"`
	NetworkInterface string            `json:"network_interface"`
	Created          string            `json:"created"`
	Subnets          []netavarkSubnet  `json:"subnets"`
	IPv6             bool              `json:"ipv6_enabled"`
	Internal         bool              `json:"internal"`
	DNS              bool              `json:"dns_enabled"`
	IPAM             map[string]string `json:"ipam_options"`
	Labels           map[string]string `json:"labels,omitempty"`
}

type netavarkSubnet struct {
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway"`
}

// check validates the settings, naming the field at fault.
func (a Allowlist) check() (netip.Prefix, error) {
	if a.Port <= 0 || a.Port > 65535 {
		return netip.Prefix{}, fmt.Errorf("port: %d is not a TCP port", a.Port)
	}
	if len(a.Bridge) > 15 || strings.ContainsAny(a.Bridge, "/ \t:") {
		return netip.Prefix{}, fmt.Errorf("bridge: %q is not an interface name (at most 15 bytes, no / or spaces)", a.Bridge)
	}
	p, err := netip.ParsePrefix(a.Subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 29 || p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("subnet: %q is not an IPv4 network of at least 8 addresses (like 10.89.78.0/24)", a.Subnet)
	}
	return p, nil
}

// Gateway is the bridge's own address: the host as a run sees it
// (host.containers.internal).
func (a Allowlist) Gateway() (netip.Addr, error) {
	p, err := a.withDefaults().check()
	if err != nil {
		return netip.Addr{}, err
	}
	return p.Addr().Next(), nil
}

// networkFile is the network's definition for podman.
func (a Allowlist) networkFile() ([]byte, error) {
	p, err := a.check()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte("berth network " + a.Name))
	return json.MarshalIndent(netavarkNetwork{
		Name: a.Name, ID: hex.EncodeToString(sum[:]), Driver: "bridge", NetworkInterface: a.Bridge,
		Created:  "2026-01-01T00:00:00Z",
		Subnets:  []netavarkSubnet{{Subnet: p.String(), Gateway: p.Addr().Next().String()}},
		Internal: true, IPAM: map[string]string{"driver": "host-local"},
		Labels: map[string]string{"berth.network": "allowlist", "berth.gateway-port": strconv.Itoa(a.Port)},
	}, "", "  ")
}

// rules are the iptables commands that make the network an allowlist,
// each as (check, add): the check's arguments, with -C, tell whether the
// rule is in place.
func (a Allowlist) rules() [][]string {
	c := a.chain()
	port := strconv.Itoa(a.Port)
	return [][]string{
		// From the bridge to this host: the gateway's port, and answers.
		{"-A", c, "-p", "tcp", "--dport", port, "-j", "ACCEPT"},
		{"-A", c, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
		{"-A", c, "-j", "REJECT"},
		{"-I", "INPUT", "-i", a.Bridge, "-j", c},
		// Nothing through the host: not out, not to a peer on the bridge
		// (with br_netfilter, bridged frames pass FORWARD too).
		{"-I", "FORWARD", "-i", a.Bridge, "-j", "DROP"},
		{"-I", "FORWARD", "-o", a.Bridge, "-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED", "-j", "DROP"},
	}
}

// AgentNetworkName is the allowlist network runs join.
func (c Config) AgentNetworkName() string { return c.withDefaults().AgentNetwork }

// CreateAllowlist writes the network into the driver's state and puts the rules in
// place. Run again it changes nothing; with another port it moves the
// allowance there. It needs root (iptables).
func (c Config) CreateAllowlist(ctx context.Context, a Allowlist) error {
	a = a.withDefaults()
	if a.Name == DefaultAgentNetwork {
		a.Name = c.AgentNetworkName()
	}
	body, err := a.networkFile()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.StateDir, "networks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, a.Name+".json"), append(body, '\n'), 0o600); err != nil {
		return err
	}
	// Filtering between peers on one bridge needs br_netfilter; without it
	// the FORWARD rules see only routed traffic. Best effort: it may be
	// built in or already loaded.
	_ = exec.CommandContext(ctx, "modprobe", "br_netfilter").Run()
	ipt := iptables(ctx)
	// The chain's rules are rewritten whole, so a changed port does not
	// leave the old one open.
	if err := ipt("-N", a.chain()); err != nil && !strings.Contains(err.Error(), "exists") {
		return err
	}
	if err := ipt("-F", a.chain()); err != nil {
		return err
	}
	for _, r := range a.rules() {
		if r[1] == a.chain() {
			if err := ipt(r...); err != nil {
				return err
			}
			continue
		}
		check := append([]string{"-C"}, r[1:]...)
		if ipt(check...) == nil {
			continue
		}
		if err := ipt(r...); err != nil {
			return err
		}
	}
	return nil
}

// RemoveAllowlist takes the network's rules and file away; podman must
// have no container on it.
func (c Config) RemoveAllowlist(ctx context.Context, a Allowlist) error {
	a = a.withDefaults()
	if a.Name == DefaultAgentNetwork {
		a.Name = c.AgentNetworkName()
	}
	ipt := iptables(ctx)
	var errs []error
	for _, r := range a.rules() {
		if r[1] == a.chain() {
			continue
		}
		del := append([]string{"-D"}, r[1:]...)
		for ipt(append([]string{"-C"}, r[1:]...)...) == nil {
			if err := ipt(del...); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	if err := ipt("-F", a.chain()); err == nil {
		if err := ipt("-X", a.chain()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(c.StateDir, "networks", a.Name+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// iptables runs iptables, waiting for its lock, with the command in the error.
func iptables(ctx context.Context) func(args ...string) error {
	return func(args ...string) error {
		cmd := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
}
