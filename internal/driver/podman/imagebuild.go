package podman

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"

	"berth.dev/berth/internal/classimage"
)

// ImageBuilder builds class images into the driver's store (berth image
// build), writing podman's progress to its log.
type ImageBuilder struct {
	p   podmanCmd
	log io.Writer
}

// ImageBuilder is a builder for the driver's store. podman runs with the
// driver's own configuration, which WriteConfig writes.
func (c Config) ImageBuilder(log io.Writer) ImageBuilder {
	c = c.withDefaults()
	return ImageBuilder{p: podmanCmd{binary: c.Binary, env: c.Env()}, log: log}
}

// Build runs podman build, its output to the log.
func (b ImageBuilder) Build(ctx context.Context, bd classimage.Build) error {
	args := []string{"build", "--layers", "-f", bd.Containerfile, "-t", bd.Tag}
	for _, k := range slices.Sorted(maps.Keys(bd.Args)) {
		args = append(args, "--build-arg", k+"="+bd.Args[k])
	}
	if bd.Target != "" {
		args = append(args, "--target", bd.Target)
	}
	cmd := exec.CommandContext(ctx, b.p.binary, append(args, bd.Context)...)
	cmd.Env = b.p.env
	cmd.Stdout, cmd.Stderr = b.log, b.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("podman build: %w (its output is above)", err)
	}
	return nil
}

// User is the image's configured USER.
func (b ImageBuilder) User(ctx context.Context, image string) (string, error) {
	res, err := b.p.run(ctx, "image", "inspect", "--format", "{{.Config.User}}", image)
	if err != nil {
		return "", fmt.Errorf("podman image inspect: %w", err)
	}
	if res.code != 0 {
		return "", fmt.Errorf("image %s is not in the podman driver's store: %s", image, strings.TrimSpace(string(res.stderr)))
	}
	return strings.TrimSpace(string(res.stdout)), nil
}

// Untag removes the name, keeping the layers other images are built on.
func (b ImageBuilder) Untag(ctx context.Context, tag string) error {
	res, err := b.p.run(ctx, "untag", tag, tag)
	if err != nil {
		return err
	}
	if res.code != 0 {
		return fmt.Errorf("podman untag %s: %s", tag, strings.TrimSpace(string(res.stderr)))
	}
	return nil
}
