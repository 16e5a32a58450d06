package gateway

import (
	"context"
	"net/http"
	"strconv"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
)

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request, p account.Principal) {
	q := r.URL.Query()
	all := ""
	if b, _ := strconv.ParseBool(q.Get("all")); b {
		all = "true"
	}
	filters := map[string]string{"class": q.Get("class"), "purpose": q.Get("purpose"), "all": all}
	replyPage(s, w, r, "sandboxes", filters, func(lp listPage) (api.SandboxList, *paging.Key, error) {
		f := lp.filters
		sbs, next, err := s.sandboxes.List(r.Context(), p, sandbox.ListOptions{Class: f["class"], Purpose: f["purpose"], All: f["all"] == "true",
			Page: lp.req})
		if err != nil {
			return api.SandboxList{}, nil, err
		}
		owners := map[string]string{}
		return api.SandboxList{Sandboxes: each(sbs, func(sb sandbox.Sandbox) api.Sandbox { return s.apiSandbox(r.Context(), sb, owners) })}, next, nil
	})
}

// apiSandbox converts a sandbox, looking its owner's name up once per
// request through names, with its run when it is an agent sandbox.
func (s *Server) apiSandbox(ctx context.Context, sb sandbox.Sandbox, names map[string]string) api.Sandbox {
	name, ok := names[sb.Owner]
	if !ok {
		if u, err := s.sandboxes.Owner(ctx, sb); err == nil {
			name = u.Name
		}
		names[sb.Owner] = name
	}
	out := apiSandbox(sb, name, s.sandboxes.RunningTime(sb))
	open, last := s.sandboxes.Activity(sb)
	out.Connections, out.LastActivity = open, timePtr(last)
	if step, ok := s.sandboxes.Progress(sb); ok {
		out.Stage, out.StageSince = string(step.Stage), &step.Since
	}
	out.Run = s.runOf(ctx, sb)
	if sb.Purpose == sandbox.PurposeEngineer {
		if memory, _ := s.sandboxes.SuspendKind(sb); memory {
			out.Suspend = api.SuspendMemory
		} else {
			out.Suspend = api.SuspendStop
		}
	}
	if sb.State == sandbox.StateSuspended {
		out.CheckpointBytes = int64(sb.Checkpoint)
	}
	out.ForkedFrom = string(sb.ForkedFrom)
	for _, id := range sb.Compare {
		out.Compare = append(out.Compare, string(id))
	}
	return out
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.CreateSandbox) (api.Sandbox, error) {
		if req.OpenPR {
			if err := s.checkOpenPR(r.Context(), p, req); err != nil {
				return api.Sandbox{}, err
			}
		}
		sb, err := s.sandboxes.Create(r.Context(), p, sandbox.CreateRequest{
			Name: req.Name, Class: req.Class, Purpose: req.Purpose, Project: req.Project, TTL: req.TTL,
			Repo: req.Repo, Branch: req.Branch, Task: req.Task, Runner: req.Runner, Model: req.Model, Role: req.Role, SSHKeys: req.SSHKeys, Env: req.Env, Egress: req.Egress, Session: req.Session, Compare: req.Compare,
		})
		if err != nil {
			return api.Sandbox{}, err
		}
		if req.OpenPR {
			// Created: the sandbox is promised. A report that cannot be
			// recorded is said in the log; the run goes on without it.
			if err := s.triggers.OpenPR(r.Context(), sb); err != nil {
				s.log.ErrorContext(r.Context(), "could not record that a run opens a pull request", "sandbox", sb.ID, "err", err)
			}
		}
		return s.apiSandbox(r.Context(), sb, map[string]string{}), nil
	})
}

// checkOpenPR refuses --open-pr where no pull request can come of it,
// before anything is created.
func (s *Server) checkOpenPR(ctx context.Context, p account.Principal, req api.CreateSandbox) error {
	if err := s.openPRShape(req); err != nil {
		return err
	}
	project := req.Project
	if project == "" {
		home, err := s.accounts.HomeProject(ctx, p.User)
		if err != nil {
			return err
		}
		project = home.ID
	}
	org, prj, err := s.accounts.Scope(ctx, p, p.User.Org, project)
	if err != nil {
		return err
	}
	return s.triggers.CheckOpenPR(ctx, org, prj)
}

// openPRShape refuses --open-pr on what never opens one.
func (s *Server) openPRShape(req api.CreateSandbox) error {
	switch {
	case s.triggers == nil || !s.triggers.CanReport():
		return fault.Field("open_pr", "this deployment's forge takes no pull requests")
	case req.Purpose != string(sandbox.PurposeAgent):
		return fault.Field("open_pr", "only an agent sandbox's run opens a pull request")
	case req.Repo == "":
		return fault.Field("open_pr", "a pull request needs a repository (--repo)")
	case req.Role == string(sandbox.RoleReviewer):
		return fault.Field("open_pr", "a reviewer pushes nothing, so opens no pull request")
	}
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.answer(w, r)(s.sandboxes.Get(r.Context(), p, r.PathValue("ref")))
}

func (s *Server) suspendSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.answer(w, r)(s.sandboxes.Suspend(r.Context(), p, r.PathValue("ref")))
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.answer(w, r)(s.sandboxes.Resume(r.Context(), p, r.PathValue("ref")))
}

// giveTask gives a session its next task (SPEC S13, sessions).
func (s *Server) giveTask(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusOK, func(req api.GiveTask) (api.Sandbox, error) {
		ctx := r.Context()
		// The run the task will be: read before its start records it.
		seq := 0
		if before, err := s.sandboxes.Get(ctx, p, r.PathValue("ref")); err == nil {
			seq = s.runs.LatestSeq(ctx, before.ID) + 1
		}
		sb, err := s.sandboxes.NextTask(ctx, p, r.PathValue("ref"), req.Task)
		if err != nil {
			return api.Sandbox{}, err
		}
		if s.triggers != nil {
			// A session whose pull request is open tells it of this task
			// too, as of those its reviews give.
			s.triggers.TaskGiven(ctx, sb, seq)
		}
		return s.apiSandbox(ctx, sb, map[string]string{}), nil
	})
}

// forkSandbox copies a running engineer sandbox (SPEC S3, the isolated
// tier), or an agent's session between tasks (S13), into new ones and
// answers them, starting, as the list route does.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	replyTo(s, w, r, http.StatusCreated, func(req api.Fork) (api.SandboxList, error) {
		ctx := r.Context()
		forks, err := s.sandboxes.Fork(ctx, p, r.PathValue("ref"), sandbox.ForkRequest{Name: req.Name, Count: req.Count, Task: req.Task})
		if err != nil {
			return api.SandboxList{}, err
		}
		owners := map[string]string{}
		return api.SandboxList{Sandboxes: each(forks, func(sb sandbox.Sandbox) api.Sandbox { return s.apiSandbox(ctx, sb, owners) })}, nil
	})
}

func (s *Server) extendSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.Extend
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.answer(w, r)(s.sandboxes.ExtendWith(r.Context(), p, r.PathValue("ref"), sandbox.ExtendOptions{TTL: req.TTL, NoShorten: req.NoShorten}))
}

func (s *Server) terminateSandbox(w http.ResponseWriter, r *http.Request, p account.Principal) {
	s.answer(w, r)(s.sandboxes.Terminate(r.Context(), p, r.PathValue("ref")))
}

// answer writes a service's (sandbox, error) result.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) func(sandbox.Sandbox, error) {
	return func(sb sandbox.Sandbox, err error) {
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, s.apiSandbox(r.Context(), sb, map[string]string{}))
	}
}
