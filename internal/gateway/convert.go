package gateway

import (
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

func apiOrg(o account.Organisation) api.Organisation {
	return api.Organisation{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt}
}

func apiProject(p account.Project, def bool) api.Project {
	return api.Project{ID: p.ID, Organisation: p.Org, Name: p.Name, Default: def, CreatedAt: p.CreatedAt}
}

func apiUser(u account.User) api.User {
	return api.User{ID: u.ID, Organisation: u.Org, Name: u.Name, Email: u.Email, Role: string(u.Role), Disabled: u.Disabled, DisabledByIdP: u.DisabledByIdP,
		Issuer: u.Issuer, Subject: u.Subject, Project: u.Project, CreatedAt: u.CreatedAt}
}

func apiKey(k account.Key) api.Key {
	return api.Key{ID: k.ID, User: k.User, Name: k.Name, Sandbox: k.Sandbox, CreatedAt: k.CreatedAt,
		ExpiresAt: timePtr(k.ExpiresAt), RevokedAt: timePtr(k.RevokedAt)}
}

func apiNewKey(r account.NewKeyResult) api.NewKey {
	return api.NewKey{Key: apiKey(r.Key), Secret: r.Secret.Reveal()}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func apiClass(c class.Class) api.Class {
	s := c.Spec()
	return api.Class{Name: s.Name, Description: s.Description, Image: s.Image, Isolation: s.Isolation,
		CPU: s.CPU, Memory: s.Memory, Disk: s.Disk, DefaultTTL: s.DefaultTTL, MaxTTL: s.MaxTTL,
		Warm: s.Warm, Purposes: s.Purposes, Git: s.Git, Contract: s.Contract, SetupCommand: s.SetupCommand,
		Runner: s.Runner, Ports: s.Ports, Egress: s.Egress, SessionIdle: s.SessionIdle}
}

func apiSandbox(sb sandbox.Sandbox, ownerName string, running time.Duration) api.Sandbox {
	out := api.Sandbox{
		ID: string(sb.ID), Name: sb.Name, Organisation: sb.Org, Project: sb.Project,
		Owner: sb.Owner, OwnerName: ownerName, Purpose: string(sb.Purpose), Class: sb.Class,
		Image: sb.Image, Isolation: string(sb.Isolation), CPU: sb.CPU.String(), Memory: sb.Memory.String(),
		State: api.State(sb.State), Reason: sb.Reason, Repo: sb.Repo, Branch: sb.Branch, Runner: sb.Runner,
		Env: sb.Env, CreatedAt: sb.CreatedAt, ExpiresAt: sb.ExpiresAt, EndedAt: timePtr(sb.EndedAt),
		RunningSeconds: int64(running / time.Second), Role: string(sb.Role), FromPool: sb.FromPool,
		LifetimeCut: sb.LifetimeCut, Egress: sb.Egress, Session: sb.Session,
	}
	if sb.Purpose == sandbox.PurposeAgent {
		out.Contract = string(sb.Contract)
	}
	if sb.Disk > 0 {
		out.Disk = sb.Disk.String()
	}
	return out
}

func apiGuardrail(g guardrail.Guardrail) api.Guardrail {
	out := api.Guardrail{MaxSandboxes: g.MaxSandboxes, AllowedRepos: g.AllowedRepos, Egress: g.Egress}
	if g.MaxSandboxMemory != nil {
		m := api.Memory(quantity.FormatMiB(*g.MaxSandboxMemory))
		out.MaxSandboxMemory = &m
	}
	if g.MaxSandboxCPU != nil {
		s := g.MaxSandboxCPU.String()
		out.MaxSandboxCPU = &s
	}
	if g.MaxSandboxTTL != nil {
		s := quantity.FormatDuration(*g.MaxSandboxTTL)
		out.MaxSandboxTTL = &s
	}
	return out
}

// domainGuardrail parses a guardrail from the wire, naming the field at fault.
func domainGuardrail(in api.Guardrail) (guardrail.Guardrail, error) {
	out := guardrail.Guardrail{MaxSandboxes: in.MaxSandboxes, AllowedRepos: in.AllowedRepos, Egress: in.Egress}
	if in.MaxSandboxMemory != nil {
		mib, err := quantity.ParseMiB(string(*in.MaxSandboxMemory))
		if err != nil {
			return out, fault.Field("max_sandbox_memory", "%v", err)
		}
		out.MaxSandboxMemory = &mib
	}
	if in.MaxSandboxCPU != nil {
		cpu, err := quantity.ParseCPU(*in.MaxSandboxCPU)
		if err != nil {
			return out, fault.Field("max_sandbox_cpu", "%v", err)
		}
		out.MaxSandboxCPU = &cpu
	}
	if in.MaxSandboxTTL != nil {
		d, err := quantity.ParseDuration(*in.MaxSandboxTTL)
		if err != nil {
			return out, fault.Field("max_sandbox_ttl", "%v", err)
		}
		out.MaxSandboxTTL = &d
	}
	return out, nil
}
