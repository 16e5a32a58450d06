package gateway_test

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/trigger"
	"berth.dev/berth/internal/trigger/event"
)

// The fresh objects of the authorization matrix's cells, and what its
// refused cells must leave as it was.

// fixture is a kind of fresh object: {new-…} in a request makes one for
// the cell, kept for the row's next cells until one changes it.
type fixture struct {
	make  func(m *matrix, t *testing.T) string           // makes one; what the placeholder becomes
	state func(m *matrix, t *testing.T, v string) string // its state, compared before and after a cell
}

var fixtures = map[string]fixture{
	"new-sandbox":      {make: (*matrix).newSandbox, state: (*matrix).sandboxState},
	"new-suspended":    {make: (*matrix).newSuspended, state: (*matrix).sandboxState},
	"new-owner-key":    {make: func(m *matrix, t *testing.T) string { return m.newKey(t, "alice") }, state: (*matrix).keyState},
	"new-operator-key": {make: func(m *matrix, t *testing.T) string { return m.newKey(t, "ops") }, state: (*matrix).keyState},
	"new-co-admin-key": {make: func(m *matrix, t *testing.T) string { return m.newKey(t, "carol") }, state: (*matrix).keyState},
	"new-class":        {make: (*matrix).newClass, state: (*matrix).classState},
	"new-secret":       {make: (*matrix).newSecret, state: (*matrix).secretState},
	"new-trigger":      {make: func(m *matrix, t *testing.T) string { return m.newTrigger(t).Name }, state: (*matrix).triggerState},
	"new-trigger-id":   {make: func(m *matrix, t *testing.T) string { return m.newTrigger(t).ID }, state: (*matrix).triggerDeliveries},
	"new-member":       {make: func(m *matrix, t *testing.T) string { return m.newUser(t, account.RoleMember, false) }, state: (*matrix).userState},
	"new-disabled":     {make: func(m *matrix, t *testing.T) string { return m.newUser(t, account.RoleMember, true) }, state: (*matrix).userState},
	"new-operator":     {make: func(m *matrix, t *testing.T) string { return m.newUser(t, account.RoleOperator, false) }, state: (*matrix).userState},

	// Users of acme to invite: a member who has never had a key, an
	// operator who has never had one, and a member whose one key was
	// revoked.
	"new-invitee":          {make: func(m *matrix, t *testing.T) string { return m.newUser(t, account.RoleMember, false) }, state: (*matrix).invitationsOf},
	"new-operator-invitee": {make: func(m *matrix, t *testing.T) string { return m.newUser(t, account.RoleOperator, false) }, state: (*matrix).invitationsOf},
	"new-former-keyholder": {make: (*matrix).newFormerKeyholder, state: (*matrix).invitationsOf},
	// Invitations to redeem, each the secret sent: a live one, a live
	// one's id with a wrong secret, one used, one replaced by a newer
	// one, one expired.
	"new-invitation":          {make: (*matrix).newInvitation, state: (*matrix).invitationState},
	"new-wrong-secret":        {make: (*matrix).newWrongSecret, state: (*matrix).invitationState},
	"new-used-invitation":     {make: (*matrix).newUsedInvitation, state: (*matrix).invitationState},
	"new-replaced-invitation": {make: (*matrix).newReplacedInvitation, state: (*matrix).invitationState},
	"new-expired-invitation":  {make: (*matrix).newExpiredInvitation, state: (*matrix).invitationState},
}

func (m *matrix) next() int { m.n++; return m.n }

func (m *matrix) newSandbox(t *testing.T) string {
	t.Helper()
	sb, err := m.sandboxes.Create(t.Context(), m.principal(t, m.keys[cOwner]),
		sandbox.CreateRequest{Name: fmt.Sprintf("fresh-%d", m.next()), Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	m.running(t, sb.ID)
	return string(sb.ID)
}

func (m *matrix) newSuspended(t *testing.T) string {
	t.Helper()
	id := m.newSandbox(t)
	if _, err := m.sandboxes.Suspend(t.Context(), m.principal(t, m.keys[cOwner]), id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (m *matrix) sandboxState(t *testing.T, id string) string {
	t.Helper()
	sb, err := m.st.GetSandbox(t.Context(), sandbox.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return string(sb.State)
}

// newKey mints a key for a user and returns its id; the matrix keeps its
// secret to tell whether it still works.
func (m *matrix) newKey(t *testing.T, user string) string {
	t.Helper()
	k, err := m.accounts.CreateKey(t.Context(), m.principal(t, m.opKey), m.users[user].ID, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	m.vars["secret of "+k.Key.ID] = k.Secret.Reveal()
	return k.Key.ID
}

func (m *matrix) keyState(t *testing.T, id string) string {
	if _, err := m.accounts.Authenticate(t.Context(), m.vars["secret of "+id]); err != nil {
		return "dead"
	}
	return "live"
}

func (m *matrix) newClass(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("fresh-%d", m.next())
	if _, err := m.classes.Apply(t.Context(), m.principal(t, m.opKey), "acme", strings.NewReader(
		"sandboxes:\n  - name: "+name+"\n    image: localhost/berth-sandbox:1\n    isolation: standard\n")); err != nil {
		t.Fatal(err)
	}
	return name
}

func (m *matrix) classState(t *testing.T, name string) string {
	t.Helper()
	return strconv.FormatBool(strings.Contains(m.acmeClasses(t), "\n"+name+":"))
}

func (m *matrix) newSecret(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("FRESH_%d", m.next())
	if _, err := m.secrets.Set(t.Context(), m.principal(t, m.opKey), "acme", "default", name, []string{"api.example.com"}, secret.New("v")); err != nil {
		t.Fatal(err)
	}
	return name
}

func (m *matrix) secretState(t *testing.T, name string) string {
	t.Helper()
	all, err := m.secrets.List(t.Context(), m.principal(t, m.opKey), "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatBool(slices.ContainsFunc(all, func(x placeholder.Credential) bool { return x.Name == name }))
}

func (m *matrix) newTrigger(t *testing.T) trigger.Trigger {
	t.Helper()
	tr, err := m.triggers.Set(t.Context(), m.principal(t, m.opKey), "acme", "default",
		trigger.Trigger{Name: fmt.Sprintf("fresh-%d", m.next()), On: trigger.On{Source: event.SourceWebhook, Kind: event.KindWebhook}, Repo: "acme/app", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (m *matrix) triggerState(t *testing.T, name string) string {
	t.Helper()
	tr, ds, err := m.triggers.Get(t.Context(), m.principal(t, m.opKey), "acme", "default", name)
	return fmt.Sprint(tr.ID, tr.DailyTokens, len(ds), err)
}

// triggerDeliveries is what a trigger (by id) was handed.
func (m *matrix) triggerDeliveries(t *testing.T, id string) string {
	t.Helper()
	tr, err := m.triggers.ByID(t.Context(), id)
	if err != nil {
		return err.Error()
	}
	return m.triggerState(t, tr.Name)
}

func (m *matrix) newUser(t *testing.T, role account.Role, disabled bool) string {
	t.Helper()
	op := m.principal(t, m.opKey)
	u, err := m.accounts.CreateUser(t.Context(), op, "acme", fmt.Sprintf("fresh-%d", m.next()), "", role)
	if err != nil {
		t.Fatal(err)
	}
	if disabled {
		if _, err := m.accounts.SetDisabled(t.Context(), op, "acme", u.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	return u.ID
}

func (m *matrix) userState(t *testing.T, id string) string {
	t.Helper()
	u, err := m.accounts.User(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return "disabled " + strconv.FormatBool(u.Disabled) + ", project " + u.Project
}

// newFormerKeyholder is a member of acme who had a key, revoked since.
func (m *matrix) newFormerKeyholder(t *testing.T) string {
	t.Helper()
	op := m.principal(t, m.opKey)
	id := m.newUser(t, account.RoleMember, false)
	k, err := m.accounts.CreateKey(t.Context(), op, id, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.accounts.RevokeKey(t.Context(), op, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	return id
}

// invitationsOf counts the invitations issued for a user, as the audit
// log records them: the one trace of an invitation read without its
// secret.
func (m *matrix) invitationsOf(t *testing.T, id string) string {
	t.Helper()
	u, err := m.accounts.User(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := m.st.ListAudit(t.Context(), audit.Filter{Org: u.Org}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == audit.InvitationCreate && e.Target == u.Name {
			n++
		}
	}
	return fmt.Sprintf("%d invitations issued", n)
}

// invite has acme's administrator invite a user, and returns the
// invitation's secret.
func (m *matrix) invite(t *testing.T, user string) string {
	t.Helper()
	inv, err := m.accounts.Invite(t.Context(), m.principal(t, m.keys[cAdmin]), "acme", user, 0)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Secret.Reveal()
}

func (m *matrix) newInvitation(t *testing.T) string {
	t.Helper()
	return m.invite(t, m.newUser(t, account.RoleMember, false))
}

func (m *matrix) newWrongSecret(t *testing.T) string {
	t.Helper()
	secret := m.newInvitation(t)
	return secret[:strings.LastIndex(secret, "_")+1] + "NOTTHESECRET"
}

func (m *matrix) newUsedInvitation(t *testing.T) string {
	t.Helper()
	secret := m.newInvitation(t)
	if _, err := m.accounts.Redeem(t.Context(), secret, "first", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	return secret
}

func (m *matrix) newReplacedInvitation(t *testing.T) string {
	t.Helper()
	user := m.newUser(t, account.RoleMember, false)
	first := m.invite(t, user)
	m.invite(t, user)
	return first
}

// newExpiredInvitation stores an invitation whose life ended an hour ago:
// the service issues none that short, and the world's clock is the real
// one.
func (m *matrix) newExpiredInvitation(t *testing.T) string {
	t.Helper()
	now := time.Now()
	inv, secret := account.NewInvitation(m.newUser(t, account.RoleMember, false), m.users["ada"].ID, false, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err := m.st.CreateInvitation(t.Context(), inv); err != nil {
		t.Fatal(err)
	}
	return secret.Reveal()
}

// invitationState is whether an invitation was used, and for which key,
// or replaced.
func (m *matrix) invitationState(t *testing.T, secret string) string {
	t.Helper()
	id, _, ok := account.ParseInvitation(secret)
	if !ok {
		t.Fatalf("%q is not an invitation", secret)
	}
	inv, err := m.st.GetInvitation(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("used %t (key %q), replaced %t", !inv.RedeemedAt.IsZero(), inv.Key, !inv.ReplacedAt.IsZero())
}

// watches are what a row's refused requests must leave as they were,
// each read as the operator.
var watches = map[string]func(m *matrix, t *testing.T) string{
	"organisations": func(m *matrix, t *testing.T) string {
		orgs, _, err := m.accounts.Organisations(t.Context(), m.principal(t, m.opKey), paging.Request{})
		return fmt.Sprint(len(orgs), err)
	},
	"acme's projects": func(m *matrix, t *testing.T) string {
		prjs, _, err := m.accounts.Projects(t.Context(), m.principal(t, m.opKey), "acme", paging.Request{})
		return fmt.Sprint(len(prjs), err)
	},
	"acme's users": func(m *matrix, t *testing.T) string {
		us, _, err := m.accounts.Users(t.Context(), m.principal(t, m.opKey), "acme", paging.Request{})
		return fmt.Sprint(len(us), err)
	},
	"acme's guardrail": func(m *matrix, t *testing.T) string {
		g, err := m.accounts.Guardrail(t.Context(), m.principal(t, m.opKey), "acme", "")
		return fmt.Sprint(g, err)
	},
	"the default project's guardrail": func(m *matrix, t *testing.T) string {
		g, err := m.accounts.Guardrail(t.Context(), m.principal(t, m.opKey), "acme", "default")
		return fmt.Sprint(g, err)
	},
	"acme's agent configuration": func(m *matrix, t *testing.T) string {
		c, err := m.agentCfg.Get(t.Context(), m.principal(t, m.opKey), "acme", "")
		return fmt.Sprint(c.Instructions, c.Effort, err)
	},
	"the default project's agent configuration": func(m *matrix, t *testing.T) string {
		c, err := m.agentCfg.Get(t.Context(), m.principal(t, m.opKey), "acme", "default")
		return fmt.Sprint(c.Instructions, c.Effort, err)
	},
	"the default project's triggers": func(m *matrix, t *testing.T) string {
		ts, err := m.triggers.List(t.Context(), m.principal(t, m.opKey), "acme", "default")
		var out []string
		for _, tr := range ts {
			out = append(out, m.triggerState(t, tr.Name))
		}
		return fmt.Sprint(out, err)
	},
	"the default project's secrets": func(m *matrix, t *testing.T) string {
		prj, err := m.accounts.Project(t.Context(), m.vars["acme"], "default")
		if err != nil {
			t.Fatal(err)
		}
		rs, err := m.secrets.For(t.Context(), "sbx_watch", prj.ID)
		var out []string
		for _, r := range rs {
			out = append(out, r.Name+"="+r.Value.Reveal())
		}
		return fmt.Sprint(out, err)
	},
	"acme's inference settings": func(m *matrix, t *testing.T) string {
		s, err := m.inference.Settings(t.Context(), m.principal(t, m.opKey), "acme", "")
		return fmt.Sprintf("%+v %v", s.Settings, err)
	},
	"the default project's inference settings": func(m *matrix, t *testing.T) string {
		s, err := m.inference.Settings(t.Context(), m.principal(t, m.opKey), "acme", "default")
		return fmt.Sprintf("%+v %v", s.Settings, err)
	},
	"acme's sign-in mapping": func(m *matrix, t *testing.T) string {
		mp, err := m.sso.Mapping(t.Context(), m.principal(t, m.opKey), "acme")
		return fmt.Sprint(mp.Members, mp.Administrators, err)
	},
	"acme's classes":      (*matrix).acmeClasses,
	"operator's keys":     func(m *matrix, t *testing.T) string { return m.keysOf(t, "ops") },
	"owner's keys":        func(m *matrix, t *testing.T) string { return m.keysOf(t, "alice") },
	"co-admin's keys":     func(m *matrix, t *testing.T) string { return m.keysOf(t, "carol") },
	"owner's invitations": func(m *matrix, t *testing.T) string { return m.invitationsOf(t, m.users["alice"].ID) },
	"owner's sandboxes": func(m *matrix, t *testing.T) string {
		sbs, err := m.st.ListSandboxes(t.Context(), sandbox.Filter{Owner: m.users["alice"].ID, Ended: true})
		return fmt.Sprint(len(sbs), err)
	},
	"the runs": func(m *matrix, t *testing.T) string {
		var out []string
		for _, id := range []string{m.vars["agent"], m.vars["rev"]} {
			run, err := m.st.GetRun(t.Context(), sandbox.ID(id))
			out = append(out, fmt.Sprint(run.State, err))
		}
		return strings.Join(out, ", ")
	},
	"the runs' logs": func(m *matrix, t *testing.T) string {
		var out []string
		for _, id := range []string{m.vars["agent"], m.vars["rev"]} {
			out = append(out, strconv.Itoa(len(m.runLog(t, id))))
		}
		return strings.Join(out, ", ")
	},
	"dev's expiry": func(m *matrix, t *testing.T) string {
		sb, err := m.st.GetSandbox(t.Context(), sandbox.ID(m.vars["dev"]))
		return fmt.Sprint(sb.ExpiresAt, err)
	},
}

// runLog reads a run's log as the operator.
func (m *matrix) runLog(t *testing.T, id string) string {
	t.Helper()
	rc, _, err := m.runs.Log(t.Context(), m.principal(t, m.opKey), id)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// acmeClasses is acme's classes, one a line.
func (m *matrix) acmeClasses(t *testing.T) string {
	t.Helper()
	cs, _, err := m.classes.List(t.Context(), m.principal(t, m.opKey), "acme", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range cs {
		s := c.Spec()
		fmt.Fprintf(&b, "\n%s: %s %s %q", s.Name, s.Image, s.CPU, s.Description)
	}
	return b.String()
}

func (m *matrix) keysOf(t *testing.T, user string) string {
	t.Helper()
	ks, _, err := m.accounts.Keys(t.Context(), m.principal(t, m.opKey), m.users[user].ID, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(len(ks))
}
