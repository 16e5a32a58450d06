package server

import (
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/egress/proxy"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/store"
)

// egressSecrets are secrets by placeholder (issue 22): the projects'
// secrets sealed with the deployment's key, the authority whose
// certificates the egress proxy shows for their hosts, and the roots it
// verifies those hosts with.
type egressSecrets struct {
	service *placeholder.Service
	issuer  *proxy.Issuer
	roots   *x509.CertPool
	// triggers derives the triggers' webhook secrets.
	triggers []byte
}

func buildSecrets(cfg Config, st *store.Store, accounts *account.Service, models *inference.Service) (egressSecrets, error) {
	key, err := placeholder.LoadKey(cfg.SecretsKey)
	if err != nil {
		return egressSecrets{}, fmt.Errorf("BERTH_SECRETS_KEY_FILE: %w", err)
	}
	issuer, err := proxy.LoadIssuer(cfg.EgressCA)
	if err != nil {
		return egressSecrets{}, fmt.Errorf("BERTH_EGRESS_CA_FILE: %w", err)
	}
	var roots *x509.CertPool // nil: the system's
	if cfg.EgressUpstreamCA != "" {
		if roots, err = x509.SystemCertPool(); err != nil {
			roots = x509.NewCertPool()
		}
		b, err := os.ReadFile(cfg.EgressUpstreamCA)
		if err != nil {
			return egressSecrets{}, fmt.Errorf("BERTH_EGRESS_UPSTREAM_CA_FILE: %w", err)
		}
		if !roots.AppendCertsFromPEM(b) {
			return egressSecrets{}, fmt.Errorf("BERTH_EGRESS_UPSTREAM_CA_FILE: %s holds no PEM certificate", cfg.EgressUpstreamCA)
		}
	}
	reserved := func(string) bool { return false }
	if models != nil {
		withheld := models.Withheld()
		reserved = func(name string) bool { return slices.Contains(withheld, name) }
	}
	return egressSecrets{service: placeholder.NewService(st, accounts, key, time.Now, reserved, issuer.CertPEM()), issuer: issuer, roots: roots, triggers: key.Derive("trigger webhooks")}, nil
}
