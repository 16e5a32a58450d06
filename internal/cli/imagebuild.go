package cli

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/classimage"
	"berth.dev/berth/internal/name"
	"berth.dev/berth/internal/server"
)

func newImageBuildCmd(env Env) *cobra.Command {
	var (
		printOnly  bool
		berthImage string
		className  string
	)
	cmd := &cobra.Command{
		Use:   "build IMAGE [PATH]",
		Short: "Build a class image from a Containerfile or a devcontainer.json",
		Long: `Build IMAGE, an engineer class image, into the podman driver's store from
PATH (default: the current directory): a devcontainer.json, a Containerfile,
or a directory holding .devcontainer/devcontainer.json, .devcontainer.json,
Containerfile or Dockerfile (the first found).

The image is built as written (a devcontainer.json's "image", or its
"build.dockerfile" with its context, args and target), then berth's layer
goes on top:
  - berth-init as the entrypoint, copied from berth's sandbox image
    (--berth-image);
  - sshd, ssh-keygen and git: kept when the image has them, else installed
    with apt-get (an image without apt-get must bring them);
  - the sandbox's user, uid 1001, login berth, HOME /home/berth. A
    "remoteUser" (else "containerUser", else the image's USER) becomes it:
    its uid and group become 1001, what it owned in the image is 1001's,
    and its old HOME is a link to /home/berth;
  - "containerEnv", set in the image (${containerEnv:NAME} expands);
  - "postCreateCommand", run once per sandbox by berth-init after sshd
    starts, in the checkout (else HOME), its output in
    ~/.berth/post-create.log; an object's commands run one after another;
  - "forwardPorts", a label, and the class's ports: berth sandbox show
    lists them.
What berth does not do is refused by name: features, a compose file,
onCreateCommand and updateContentCommand. Keys that do not change the
image (customizations, postStartCommand…) are read past, saying so.

On success the class to apply is printed (berth sandbox apply -f -);
podman's progress goes to stderr. Then: berth image check IMAGE.

On Kubernetes berth has no builder: --print writes berth's layer as a
Containerfile that needs no context, FROM the devcontainer's image or ARG
BASE (your image, built first), for the cluster's own build. berth's
sandbox image must then be one the builder can pull.

podman runs with the podman driver's environment, as for
"berth admin podman-env".`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError{fmt.Errorf("%s: want an image and an optional path, got %d arguments (see %s --help)", cmd.CommandPath(), len(args), cmd.CommandPath())}
			}
			if strings.ContainsAny(args[0], " \t\n") || args[0] == "" {
				return usageError{fmt.Errorf("IMAGE: %q is not an image reference", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			from := "."
			if len(args) == 2 {
				from = args[1]
			}
			if className != "" {
				if err := name.Check(className); err != nil {
					return usageError{fmt.Errorf("--class: %w", err)}
				}
			}
			src, err := classimage.Find(from)
			if err != nil {
				return err
			}
			cfg, err := hostConfig(cmd, env)
			if err != nil {
				return fmt.Errorf("image build: the gateway's settings are wrong:\n%w", err)
			}
			if berthImage == "" {
				berthImage = server.BerthImage(cfg)
			}
			opts := classimage.Options{Tag: args[0], Berth: berthImage, UID: classimage.DefaultUID}
			if printOnly {
				base := ""
				if src.Devcontainer != nil && src.Devcontainer.Image != "" {
					base = src.Devcontainer.Image
				}
				text, err := classimage.Plan(src, base, opts).Containerfile()
				if err != nil {
					return err
				}
				_, err = io.WriteString(env.Stdout, text)
				return err
			}
			if src.Devcontainer != nil {
				for _, ig := range src.Devcontainer.Ignored {
					fmt.Fprintf(env.Stderr, "berth image build: %s: %s\n", src.Path, ig)
				}
			}
			layer, err := server.BuildImage(cmd.Context(), cfg, src, opts, env.Stderr)
			if err != nil {
				return err
			}
			if className == "" {
				className = defaultClassName(src, args[0])
			}
			user := "its user berth"
			if layer.User != "" && layer.User != classimage.UserName {
				user = "its user " + layer.User + " as berth"
			}
			fmt.Fprintf(env.Stderr, "berth image build: built %s from %s, %s (uid %d); check it with: berth image check %s\n",
				args[0], src.Path, user, layer.UID, args[0])
			return writeClass(env.Stdout, className, args[0], layer.Ports)
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "write berth's layer as a Containerfile instead of building (for a cluster's own build)")
	cmd.Flags().StringVar(&berthImage, "berth-image", "", "berth's sandbox image, berth-init's source (default $BERTH_SANDBOX_INIT_IMAGE or localhost/berth-sandbox:latest)")
	cmd.Flags().StringVar(&className, "class", "", "the name of the class printed (default: the devcontainer's name, else the image's)")
	return cmd
}

// defaultClassName is the devcontainer's name or the image's, made a name.
func defaultClassName(src classimage.Source, image string) string {
	var candidates []string
	if src.Devcontainer != nil {
		candidates = append(candidates, src.Devcontainer.Name)
	}
	repo, _, _ := strings.Cut(path.Base(image), ":")
	candidates = append(candidates, repo)
	for _, c := range candidates {
		var b strings.Builder
		for _, r := range strings.ToLower(c) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
				b.WriteRune(r)
			case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
				b.WriteByte('-')
			}
		}
		n := strings.Trim(b.String(), "-")
		if len(n) > name.Max {
			n = strings.Trim(n[:name.Max], "-")
		}
		if name.Check(n) == nil {
			return n
		}
	}
	return "workstation"
}

// writeClass prints the class of the image, for berth sandbox apply -f.
func writeClass(w io.Writer, className, image string, ports []int) error {
	var b strings.Builder
	b.WriteString("# berth sandbox apply -f this file (cpu, memory and the rest as you choose)\n")
	b.WriteString("sandboxes:\n")
	fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    purposes: [engineer]\n", className, strconv.Quote(image))
	if len(ports) > 0 {
		ps := make([]string, len(ports))
		for i, p := range ports {
			ps[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(&b, "    ports: [%s]\n", strings.Join(ps, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
