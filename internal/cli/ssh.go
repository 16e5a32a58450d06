package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/openssh"
)

func newSandboxProxyCmd(g *globals) *cobra.Command {
	var port int
	var fdPass bool
	cmd := &cobra.Command{
		Use:   "proxy NAME",
		Short: "Connect standard input and output to a sandbox's port (an ssh ProxyCommand)",
		Long: `Open a tunnel through the gateway to a port of a running sandbox and connect
it to standard input and output, until either end closes. It is the
ProxyCommand of the ssh entries berth sandbox config writes, so ssh, scp,
sftp and editors' remote-ssh reach a sandbox through the gateway, which
checks you may open a shell in it (its owner or an operator).

With --fd-pass and ssh's ProxyUseFdpass (berth's entries for an http://
gateway set both) it hands the connection itself to ssh and exits, so no
process copies the bytes in between; given ordinary pipes, as by a client
that ignores ProxyUseFdpass, it copies as usual.

The key comes from $BERTH_API_KEY or the login file, as for every command,
never from the command line, so it stays out of process listings.`,
		Example: `  ssh -o ProxyCommand='berth sandbox proxy --url https://berth.example.com dev' berth@dev
  berth sandbox proxy dev --port 8080 </dev/null   # another port (1024–65535)`,
		Args: exactArgs(1, "a sandbox name or id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			conn, err := c.Tunnel(cmd.Context(), args[0], port)
			if err != nil {
				return err
			}
			defer conn.Close()
			if fdPass {
				if passed, err := openssh.PassConn(conn.Conn, g.env.Stdin, g.env.Stdout); passed || err != nil {
					return err
				}
			}
			// Standard input ending is a half-close: the sandbox's answer
			// still comes back. The copier is left blocked on standard input
			// when the sandbox ends first; the process is about to exit.
			go func() {
				_, _ = io.Copy(conn, g.env.Stdin)
				_ = conn.CloseWrite()
			}()
			_, err = io.Copy(g.env.Stdout, conn)
			return err
		},
	}
	cmd.Flags().IntVar(&port, "port", openssh.Port, "the sandbox's port (1024–65535)")
	cmd.Flags().BoolVar(&fdPass, "fd-pass", false, "hand the connection itself to ssh when it asks (ProxyUseFdpass; http:// gateways), else copy as usual")
	return cmd
}

func newSandboxSSHCmd(g *globals) *cobra.Command {
	var identity string
	var tty bool
	cmd := &cobra.Command{
		Use:   "ssh NAME [-- COMMAND...]",
		Short: "Open an ssh session in a sandbox through the gateway",
		Long: `Open an ssh session in a running sandbox, or run COMMAND in it, in one step:
it runs the system's ssh as user berth with berth sandbox proxy as its
ProxyCommand, so the connection goes through the gateway. ssh uses your own
keys as it always does, or -i FILE, or the key files the sandbox was
created with (create --ssh-key FILE, remembered by this CLI) and no other;
the sandbox was given the public keys at creation. Host-key checking is off for this connection only: the gateway
already authenticated the path.

For scp, sftp, editors and a plain "ssh berth-NAME", write config entries
once with berth sandbox config.`,
		Example: `  berth sandbox ssh dev
  berth sandbox ssh dev -- git -C ~/app status
  berth sandbox ssh dev -t -- htop`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || (cmd.ArgsLenAtDash() >= 0 && cmd.ArgsLenAtDash() != 1) {
				return usageError{fmt.Errorf("%s: want a sandbox name, then -- and a command if any (see %s --help)", cmd.CommandPath(), cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, url, err := g.clientAndURL()
			if err != nil {
				return err
			}
			sb, err := c.Sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := shellable(sb); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the berth binary for ssh's ProxyCommand: %w", err)
			}
			bin, err := exec.LookPath("ssh")
			if err != nil {
				return errors.New("ssh: the OpenSSH client is not installed (apt-get install openssh-client)")
			}
			argv := []string{"ssh", "-o", "ProxyCommand=" + openssh.ProxyCommand(exe, url, args[0])}
			if openssh.FdPassable(url) {
				argv = append(argv, "-o", "ProxyUseFdpass=yes")
			}
			argv = append(argv, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
				"-p", strconv.Itoa(openssh.Port), "-l", openssh.User)
			ids, err := g.readIdentities()
			if err != nil {
				return err
			}
			if files := ids.of(url, sb.ID); identity == "" && len(files) > 0 {
				for _, f := range files {
					argv = append(argv, "-i", f)
				}
				argv = append(argv, "-o", "IdentitiesOnly=yes")
			} else if identity != "" {
				argv = append(argv, "-i", identity)
			}
			if tty {
				argv = append(argv, "-t")
			}
			argv = append(argv, openssh.HostAlias(sb.Name))
			argv = append(argv, args[1:]...)
			return g.runSSH(bin, argv)
		},
	}
	cmd.Flags().StringVarP(&identity, "identity", "i", "", "the private key file for ssh (default: the files the sandbox was created with, else ssh's choice)")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "force a terminal, for full-screen programs given as COMMAND")
	return cmd
}

// shellable refuses, before ssh starts, a sandbox it could not reach, with
// what to do instead.
// It says why the sandbox is in its state, as the gateway's tunnel does.
func shellable(sb api.Sandbox) error {
	if sb.Purpose != "engineer" {
		return fmt.Errorf("sandbox %s is an agent sandbox: nothing attaches to it", sb.Name)
	}
	if sb.State == api.StateRunning {
		return nil
	}
	msg := fmt.Sprintf("sandbox %s is %s", sb.Name, sb.State)
	if sb.Reason != "" && sb.Reason != string(sb.State) {
		msg += " (" + sb.Reason + ")"
	}
	switch sb.State {
	case api.StateSuspended, api.StateExpired:
		msg += fmt.Sprintf("; resume it first (berth sandbox resume %s)", sb.Name)
	case api.StateFailed:
		msg += fmt.Sprintf("; a failed sandbox is over: its volume is kept until it is terminated (berth sandbox terminate %s)", sb.Name)
	default:
		msg += ", not running"
	}
	return errors.New(msg)
}

// runSSH replaces this process with ssh when the environment allows
// (the terminal and signals are then ssh's alone), else runs it as a child
// and passes its exit code on.
func (g *globals) runSSH(bin string, argv []string) error {
	if g.env.Exec != nil {
		return g.env.Exec(bin, argv, os.Environ())
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = g.env.Stdin, g.env.Stdout, g.env.Stderr
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return exitError{code: ee.ExitCode()}
	}
	return err
}
