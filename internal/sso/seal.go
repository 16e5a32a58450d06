package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"berth.dev/berth/internal/secret"
)

// sealer keeps the provider's refresh tokens unreadable in the database:
// AES-256-GCM under a key drawn (HKDF-SHA256) from berth's client secret,
// which every replica has already, so no key file is added. Each token is
// bound to its person (issuer and subject as additional data), so a row's
// token cannot be moved to another's. A new client secret makes the old
// tokens unreadable: those sessions are no longer refreshed and end with
// their keys.
type sealer struct{ aead cipher.AEAD }

func newSealer(clientSecret secret.Secret) (*sealer, error) {
	if clientSecret.Reveal() == "" {
		return nil, errors.New("the client secret is required: refresh tokens are sealed under it")
	}
	key, err := hkdf.Key(sha256.New, []byte(clientSecret.Reveal()), nil, "berth sso refresh token v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func boundTo(issuer, subject string) []byte { return []byte(issuer + "\x00" + subject) }

// seal returns token sealed for the person; nil for no token.
func (s *sealer) seal(token secret.Secret, issuer, subject string) []byte {
	if token.Reveal() == "" {
		return nil
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(token.Reveal())+s.aead.Overhead())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, []byte(token.Reveal()), boundTo(issuer, subject))
}

// open is seal undone.
func (s *sealer) open(sealed []byte, issuer, subject string) (secret.Secret, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return secret.Secret{}, errors.New("the sealed refresh token is cut short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], boundTo(issuer, subject))
	if err != nil {
		return secret.Secret{}, fmt.Errorf("the refresh token cannot be opened (was the client secret changed?): %w", err)
	}
	return secret.New(string(plain)), nil
}
