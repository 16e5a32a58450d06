// Package input checks what a create hands a sandbox of its own, one
// floor below sandbox: its environment (names, not the gateway's BERTH_
// variables, no NUL byte; SPEC S3, S15) and its ssh public keys, each
// bounded, because the sandbox keeps them and shows them in every answer
// about it, lists included. Pure: each check names the field it refuses.
package input

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// The bounds of a sandbox's own environment: it is stored with the
// sandbox and in every answer about it, lists included.
const (
	MaxEnvVars  = 100
	MaxEnvName  = 256
	MaxEnvValue = 32 << 10
	MaxEnv      = 64 << 10 // names and values together
)

// Env refuses caller-added variables that are not names, or that name a
// BERTH_ variable: those are the gateway's (SPEC S3). It returns the field
// it refuses ("env" or "env.NAME") and why.
func Env(env map[string]string) (field string, err error) {
	if len(env) > MaxEnvVars {
		return "env", fmt.Errorf("%d variables; at most %d", len(env), MaxEnvVars)
	}
	size := 0
	for k, v := range env {
		size += len(k) + len(v)
		field := "env." + k
		switch {
		case len(k) > MaxEnvName:
			return "env", fmt.Errorf("a name of %d bytes; at most %d", len(k), MaxEnvName)
		case !envNameRE.MatchString(k):
			return field, fmt.Errorf("%q is not an environment variable name", k)
		case strings.HasPrefix(strings.ToUpper(k), "BERTH_"):
			return field, fmt.Errorf("%s is the gateway's: a sandbox's own environment may not name a BERTH_ variable", k)
		case strings.ContainsRune(v, 0):
			return field, errors.New("the value holds a NUL byte")
		case len(v) > MaxEnvValue:
			return field, fmt.Errorf("the value is %d bytes; at most %d", len(v), MaxEnvValue)
		}
	}
	if size > MaxEnv {
		return "env", fmt.Errorf("%d bytes of names and values; at most %d", size, MaxEnv)
	}
	return "", nil
}

// An engineer sandbox takes at most MaxSSHKeys public keys of at most
// MaxSSHKey bytes each (a 16384-bit RSA key is about 2.8 KB).
const (
	MaxSSHKeys = 32
	MaxSSHKey  = 16 << 10
)

// SSHKeys accepts at most MaxSSHKeys ssh public keys, each one in
// authorized_keys form. It returns the field it refuses ("ssh_keys" or
// "ssh_keys[i]") and why.
func SSHKeys(keys []string) (field string, err error) {
	if len(keys) > MaxSSHKeys {
		return "ssh_keys", fmt.Errorf("%d keys; at most %d", len(keys), MaxSSHKeys)
	}
	for i, k := range keys {
		if err := authorizedKey(k); err != nil {
			return fmt.Sprintf("ssh_keys[%d]", i), err
		}
	}
	return "", nil
}

// authorizedKey accepts one ssh public key in authorized_keys form.
func authorizedKey(line string) error {
	if len(line) > MaxSSHKey {
		return fmt.Errorf("%d bytes; at most %d", len(line), MaxSSHKey)
	}
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("one key per entry, without line breaks")
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
		return fmt.Errorf("not an ssh public key: %v", err)
	}
	return nil
}
