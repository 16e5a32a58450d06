package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// identities is what the CLI remembers of the keys sandboxes were created
// with (--ssh-key FILE), so that berth sandbox config and berth sandbox
// ssh offer ssh that key and no other: gateway URL → sandbox ID → the key
// files, absolute.
type identities map[string]map[string][]string

// identitiesPath is the file beside the login file where they are kept:
// config.json's is config.ssh-keys.json.
func (g *globals) identitiesPath() (string, error) {
	p, err := g.configPath()
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(p, ".json") + ".ssh-keys.json", nil
}

func (g *globals) readIdentities() (identities, error) {
	ids := identities{}
	path, err := g.identitiesPath()
	if err != nil {
		return ids, nil // no place for them: ssh's own choice
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ids, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	return ids, nil
}

// rememberIdentities records the key files of a sandbox just created at
// the gateway url, from the public key files create sent.
func (g *globals) rememberIdentities(url, id string, pubFiles []string) error {
	if len(pubFiles) == 0 {
		return nil
	}
	path, err := g.identitiesPath()
	if err != nil {
		return nil
	}
	ids, err := g.readIdentities()
	if err != nil {
		return err
	}
	var files []string
	for _, f := range pubFiles {
		files = append(files, identityFile(f))
	}
	if ids[url] == nil {
		ids[url] = map[string][]string{}
	}
	ids[url][id] = files
	return writePrivateJSON(path, ids)
}

// identityFile is what ssh's IdentityFile names for the public key file
// pub, absolute: its private half beside it when there is one, else the
// public key itself, which makes ssh use that key from its agent.
func identityFile(pub string) string {
	if abs, err := filepath.Abs(pub); err == nil {
		pub = abs
	}
	if priv, ok := strings.CutSuffix(pub, ".pub"); ok {
		if fi, err := os.Stat(priv); err == nil && fi.Mode().IsRegular() {
			return priv
		}
	}
	return pub
}

// of is the remembered key files of sandbox id at url that still exist.
func (ids identities) of(url, id string) []string {
	var out []string
	for _, f := range ids[url][id] {
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out
}
