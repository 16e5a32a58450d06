package fake_test

import (
	"testing"

	"berth.dev/berth/internal/driver/drivertest"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/sandbox"
)

func TestContract(t *testing.T) {
	drivertest.Run(t, drivertest.Options{
		NewDriver: func(*testing.T) sandbox.Driver { return fake.New() },
		Image:     "localhost/berth-sandbox:test",
		SSHKey:    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk test",
	})
}
