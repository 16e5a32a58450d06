// Package classimage makes a class image from a deployment's own image
// (berth image build): berth's layer on top of it, from a Containerfile
// or a repository's devcontainer.json. The layer is what a sandbox needs
// of its image: berth-init as the entrypoint, sshd and git, the sandbox's
// user at its uid with an unlocked account and a private HOME, and what
// the devcontainer.json asks of the machine (its environment, its
// postCreateCommand, its ports).
package classimage

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/devcontainer"
)

// The places and names berth's layer and berth-init agree on.
const (
	// Home is the sandbox user's HOME, where its volume is mounted.
	Home = "/home/berth"
	// UserName is the sandbox user's login name.
	UserName = "berth"
	// LabelPurpose, LabelUID and LabelPorts are what the image says of
	// itself.
	LabelPurpose = "berth.purpose"
	LabelUID     = "berth.uid"
	LabelPorts   = "berth.forward-ports"
	// DefaultUID is the sandbox user's uid in berth's images.
	DefaultUID = 1001
)

// Layer is berth's layer over a base image.
type Layer struct {
	// Base is the image the layer goes on; "" writes `ARG BASE` for a
	// build elsewhere to give.
	Base string
	// Berth is berth's sandbox image, which berth-init is copied from.
	Berth string
	// UID is the sandbox user's uid; User the account of the base image
	// that becomes it ("" or "berth": none to map).
	UID  int
	User string
	// Env is set in the image, as devcontainer.Config.Env writes it.
	Env map[string]string
	// PostCreate runs once per sandbox; nil: nothing.
	PostCreate *devcontainer.Command
	// Ports are the ones to forward, for `berth sandbox show`.
	Ports []int
	// Source says what the image was built from, for its label.
	Source string
}

// Containerfile is the layer's Containerfile: it needs no build context,
// so a cluster's own builder can build it as printed.
func (l Layer) Containerfile() (string, error) {
	if l.UID <= 0 {
		return "", fmt.Errorf("uid %d: the sandbox's user is never root", l.UID)
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# berth's layer (berth image build): berth-init as the entrypoint, sshd and")
	w("# git, the sandbox's user at uid %d with HOME %s, and what the", l.UID, Home)
	w("# devcontainer.json asks of the machine.")
	w("FROM %s AS berth", l.Berth)
	if l.Base == "" {
		w("ARG BASE")
		w("FROM ${BASE}")
	} else {
		w("FROM %s", l.Base)
	}
	w("USER 0:0")
	w("COPY --from=berth /usr/local/bin/berth-init /usr/local/bin/berth-init")
	w("RUN ln -sf berth-init /usr/local/bin/git-credential-berth \\")
	w(" && printf '%%s\\n' \\")
	for line := range strings.Lines(layerScript) {
		w("    %s \\", shellQuote(strings.TrimRight(line, "\n")))
	}
	w("    >/tmp/berth-layer.sh \\")
	w(" && sh /tmp/berth-layer.sh %d %s \\", l.UID, shellQuote(l.User))
	w(" && rm /tmp/berth-layer.sh")
	if l.PostCreate != nil {
		cmd, err := l.PostCreate.MarshalJSON() // not json.Marshal, which escapes < > & again
		if err != nil {
			return "", err
		}
		w("RUN mkdir -p /etc/berth && printf '%%s\\n' %s >%s", shellQuote(string(cmd)), devcontainer.PostCreateFile)
	}
	if len(l.Env) > 0 {
		w("ENV \\")
		names := slices.Sorted(maps.Keys(l.Env))
		for i, k := range names {
			end := " \\"
			if i == len(names)-1 {
				end = ""
			}
			w("    %s=\"%s\"%s", k, l.Env[k], end)
		}
	}
	labels := []string{LabelPurpose + `="engineer"`, fmt.Sprintf(`%s="%d"`, LabelUID, l.UID)}
	if len(l.Ports) > 0 {
		ports := make([]string, len(l.Ports))
		for i, p := range l.Ports {
			ports[i] = strconv.Itoa(p)
		}
		labels = append(labels, fmt.Sprintf(`%s="%s"`, LabelPorts, strings.Join(ports, " ")))
	}
	if l.Source != "" {
		labels = append(labels, fmt.Sprintf(`berth.source=%q`, l.Source))
	}
	w("LABEL %s", strings.Join(labels, " "))
	w("USER %d:%d", l.UID, l.UID)
	w("WORKDIR %s", Home)
	w(`ENTRYPOINT ["/usr/local/bin/berth-init"]`)
	w("CMD []")
	return b.String(), nil
}

// shellQuote quotes s for sh, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// layerScript runs as root in the build: sh layer.sh UID USER. It makes
// sure of sshd, ssh-keygen and git (installing them where apt-get can),
// and makes the sandbox's user: USER mapped to UID, renamed berth, its
// HOME moved to /home/berth (its old HOME a link there) and what it owned
// elsewhere in the image made UID's; with no USER, a user berth, unless
// the image has it already.
const layerScript = `set -eu
uid=$1
want=$2
say() { printf 'berth image build: %s\n' "$*" >&2; }
missing=
for f in /usr/sbin/sshd /usr/bin/ssh-keygen; do [ -x "$f" ] || missing=1; done
command -v git >/dev/null 2>&1 || missing=1
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing openssh-server, openssh-client and git with apt-get"
    apt-get -q update >&2
    DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends install openssh-server openssh-client git ca-certificates >&2
    rm -rf /var/lib/apt/lists/*
  else
    say "the image has no sshd, ssh-keygen or git, and no apt-get to install them: install openssh-server and git in its Containerfile"
    exit 1
  fi
fi
rm -f /etc/ssh/ssh_host_*
for t in useradd usermod groupadd groupmod getent; do
  command -v "$t" >/dev/null 2>&1 || { say "the image has no $t: berth makes the sandbox's user with the shadow tools"; exit 1; }
done
if [ -n "$want" ]; then
  entry=$(getent passwd "$want") || { say "remoteUser $want: the image has no such user"; exit 1; }
  want=${entry%%:*}
fi
holder=$(getent passwd "$uid" | cut -d: -f1) || holder=
if [ -n "$want" ] && [ "$want" != berth ]; then
  [ "$want" != root ] || { say "remoteUser: a sandbox never runs as root"; exit 1; }
  if [ -n "$holder" ] && [ "$holder" != "$want" ]; then
    say "remoteUser $want: uid $uid, the sandbox's, is $holder's in the image"
    exit 1
  fi
  if getent passwd berth >/dev/null; then
    say "remoteUser $want: the image has a user berth already; leave remoteUser out to use it"
    exit 1
  fi
  old=$(id -u "$want")
  oldgid=$(id -g "$want")
  oldhome=$(getent passwd "$want" | cut -d: -f6)
  if [ "$oldgid" != "$uid" ]; then
    if getent group "$uid" >/dev/null; then
      say "remoteUser $want: gid $uid, the sandbox's, is group $(getent group "$uid" | cut -d: -f1)'s in the image"
      exit 1
    fi
    groupmod -g "$uid" "$(id -gn "$want")"
  fi
  if [ "$oldhome" != /home/berth ] && [ -d /home/berth ]; then
    rmdir /home/berth 2>/dev/null || { say "remoteUser $want: /home/berth, the sandbox's HOME, is in the image already and not empty"; exit 1; }
  fi
  usermod -l berth -u "$uid" -g "$uid" -d /home/berth -m "$want"
  if [ "$old" != "$uid" ]; then find / -xdev -uid "$old" -exec chown -h "$uid" {} +; fi
  if [ "$oldgid" != "$uid" ]; then find / -xdev -gid "$oldgid" -exec chgrp -h "$uid" {} +; fi
  if [ "$oldhome" != /home/berth ] && [ ! -e "$oldhome" ]; then ln -s /home/berth "$oldhome"; fi
  say "remoteUser $want is the sandbox's user: uid $uid, login berth, HOME /home/berth"
elif [ -z "$holder" ]; then
  getent passwd berth >/dev/null && { say "the image's user berth is not uid $uid"; exit 1; }
  getent group "$uid" >/dev/null || groupadd -g "$uid" berth
  useradd -u "$uid" -g "$uid" -m -d /home/berth -s /bin/sh berth
elif [ "$holder" != berth ]; then
  say "uid $uid, the sandbox's, is $holder's in the image: name remoteUser $holder to make it the sandbox's user"
  exit 1
fi
shell=$(command -v bash || echo /bin/sh)
usermod -p '*' -s "$shell" berth
mkdir -p /home/berth
chown "$uid:$uid" /home/berth
chmod 0700 /home/berth
`
