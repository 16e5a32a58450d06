package classimage

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/devcontainer"
)

// Builder builds images into the driver's store: the podman driver's.
type Builder interface {
	// Build builds containerfile with context into tag.
	Build(ctx context.Context, b Build) error
	// User is the image's configured USER ("" for none).
	User(ctx context.Context, image string) (string, error)
	// Untag removes the name tag, keeping what other images use.
	Untag(ctx context.Context, tag string) error
}

// Build is one image build.
type Build struct {
	Containerfile, Context, Tag string
	Args                        map[string]string
	Target                      string
}

// Source is what berth image build reads: a devcontainer.json, or a
// Containerfile with its context.
type Source struct {
	// Path is the file as given or found, for messages and the label.
	Path string
	// Devcontainer is the parsed devcontainer.json; nil for a
	// Containerfile.
	Devcontainer *devcontainer.Config
	// Containerfile and Context are the build of a Containerfile given
	// directly.
	Containerfile, Context string
}

// The files Find looks for in a directory, in order.
var findOrder = []string{
	".devcontainer/devcontainer.json",
	".devcontainer.json",
	"Containerfile",
	"Dockerfile",
}

// Find reads what path names: a devcontainer.json (by its name), another
// file (a Containerfile, built in its directory), or a directory holding
// one of findOrder.
func Find(path string) (Source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Source{}, err
	}
	if fi.IsDir() {
		for _, name := range findOrder {
			p := filepath.Join(path, name)
			if _, err := os.Stat(p); err == nil {
				return Find(p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return Source{}, err
			}
		}
		return Source{}, fmt.Errorf("%s holds none of %s", path, strings.Join(findOrder, ", "))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Source{}, err
	}
	if !strings.HasSuffix(filepath.Base(abs), "devcontainer.json") {
		return Source{Path: path, Containerfile: abs, Context: filepath.Dir(abs)}, nil
	}
	data, err := readBounded(abs, devcontainer.MaxFile)
	if err != nil {
		return Source{}, err
	}
	c, err := devcontainer.Parse(data)
	if err != nil {
		return Source{}, fmt.Errorf("%s: %w", path, err)
	}
	c.Resolve(filepath.Dir(abs))
	return Source{Path: path, Devcontainer: &c}, nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// Options are berth image build's choices.
type Options struct {
	// Tag is the image made.
	Tag string
	// Berth is berth's sandbox image, which berth-init comes from.
	Berth string
	// UID is the sandbox user's uid.
	UID int
}

// Plan is the layer for src over base, without building anything: what
// --print writes (base "" leaves it to the build's BASE argument).
func Plan(src Source, base string, opts Options) Layer {
	l := Layer{Base: base, Berth: opts.Berth, UID: opts.UID, Source: src.Path}
	if c := src.Devcontainer; c != nil {
		l.User, l.Env, l.PostCreate, l.Ports = c.User, c.Env, c.PostCreate, c.Ports
	}
	return l
}

// Make builds src into opts.Tag with b: the base (the devcontainer's
// image, or its or the given Containerfile built first under a temporary
// tag), then berth's layer on it. It returns the layer it built.
func Make(ctx context.Context, b Builder, src Source, opts Options) (Layer, error) {
	base, cleanup := "", func() {}
	file, bctx := src.Containerfile, src.Context
	var args map[string]string
	var target string
	if c := src.Devcontainer; c != nil {
		base, file, bctx, args, target = c.Image, c.Dockerfile, c.Context, c.BuildArgs, c.Target
	}
	if base == "" {
		base = "localhost/berth-build-" + strings.ToLower(rand.Text()[:12]) + ":base"
		if err := b.Build(ctx, Build{Containerfile: file, Context: bctx, Tag: base, Args: args, Target: target}); err != nil {
			return Layer{}, fmt.Errorf("build %s: %w", src.Path, err)
		}
		cleanup = func() { _ = b.Untag(context.WithoutCancel(ctx), base) }
	}
	defer cleanup()
	l := Plan(src, base, opts)
	if l.User == "" {
		u, err := b.User(ctx, base)
		if err != nil {
			return Layer{}, err
		}
		// The image's own USER, unless it is root's: a name, or a uid the
		// layer looks up.
		if name, _, _ := strings.Cut(u, ":"); name != "" && name != "root" && name != "0" {
			l.User = name
		}
	}
	text, err := l.Containerfile()
	if err != nil {
		return Layer{}, err
	}
	dir, err := os.MkdirTemp("", "berth-image-build-")
	if err != nil {
		return Layer{}, err
	}
	defer os.RemoveAll(dir)
	cf := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(cf, []byte(text), 0o644); err != nil {
		return Layer{}, err
	}
	if err := b.Build(ctx, Build{Containerfile: cf, Context: dir, Tag: opts.Tag}); err != nil {
		return Layer{}, fmt.Errorf("berth's layer on %s: %w", src.Path, err)
	}
	return l, nil
}
