package agentrun

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
)

// chooseModel is the model an agent sandbox's run starts on (SPEC S15's
// BERTH_MODEL), decided at create so that a run no model fits is refused
// before anything starts. The candidates are the models the sandbox's key
// may reach (its project's allow-lists; budgets are not looked at), and of
// them only those served in an API the runner speaks (runner.Speaks):
// the creator's (requested, refused naming the field when it is not one),
// else the project's agent configuration's (or its organisation's), else
// the deployment's (Config.Model), each only when it is one, else
// the first of them, chat models before routers, in the deployment's
// order. An agent sandbox without a runner takes the requested model when
// its key may reach it, and "" (the first its key reaches) otherwise.
func (s *Service) chooseModel(ctx context.Context, org string, prj account.Project, runnerName, requested string) (string, error) {
	if runnerName == "" && requested == "" {
		return "", nil
	}
	reach, err := s.reachable(ctx, org, prj.ID)
	if err != nil {
		return "", err
	}
	var r runner.Runner
	if runnerName != "" {
		if r, err = runner.Get(runnerName); err != nil {
			return "", err
		}
	}
	fits := func(m runner.Model) bool {
		if r == nil {
			return true
		}
		_, ok := runner.Speaks(r, m)
		return ok
	}
	if requested != "" {
		i := slices.IndexFunc(reach, func(m runner.Model) bool { return m.ID == requested })
		switch {
		case s.models == nil:
			return "", fault.Field("model", "this gateway serves no models (BERTH_INFERENCE_FILE is unset)")
		case i < 0:
			return "", fault.Field("model", "project %s may not reach %q; it may reach %s", prj.Name, requested, listModels(reach))
		case !fits(reach[i]):
			return "", fault.Field("model", "%s is served in %s, and runner %s speaks %s", requested, joinAPIs(reach[i].APIs), runnerName, joinAPIs(r.APIs()))
		}
		return requested, nil
	}
	defaults := []string{s.cfg.Model}
	if s.agentCfg != nil {
		c, err := s.agentCfg.ForRun(ctx, org, prj.ID)
		if err != nil {
			return "", err
		}
		defaults = []string{c.Model, s.cfg.Model} // the project's, the organisation's, then the deployment's
	}
	for _, def := range defaults {
		if i := slices.IndexFunc(reach, func(m runner.Model) bool { return m.ID == def }); def != "" && i >= 0 && fits(reach[i]) {
			return def, nil
		}
	}
	for _, m := range reach {
		if fits(m) {
			return m.ID, nil
		}
	}
	switch {
	case s.models == nil:
		return "", fault.Errorf(fault.Unavailable, "runner %s has no model to call: this gateway serves no models (BERTH_INFERENCE_FILE is unset)", runnerName)
	case len(reach) == 0:
		return "", fault.Errorf(fault.Unavailable, "runner %s has no model to call: project %s may reach no model (an administrator allows some with berth project inference set)", runnerName, prj.Name)
	}
	return "", fault.Errorf(fault.Unavailable, "runner %s speaks %s, and project %s may reach no model served in it: it may reach %s; choose another --runner, or an administrator allows a model it speaks",
		runnerName, joinAPIs(r.APIs()), prj.Name, listModels(reach))
}

// reachable lists the models a key of the project may reach, with their
// APIs; none without inference.
func (s *Service) reachable(ctx context.Context, org, project string) ([]runner.Model, error) {
	if s.models == nil {
		return nil, nil
	}
	reach, err := s.models.Reachable(ctx, org, project)
	if err != nil {
		return nil, fmt.Errorf("models of project %s: %w", project, err)
	}
	return reach, nil
}

// listModels names models with the APIs each is served in, for a message.
func listModels(ms []runner.Model) string {
	if len(ms) == 0 {
		return "none"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.ID + " (" + joinAPIs(m.APIs) + ")"
	}
	return strings.Join(parts, ", ")
}

func joinAPIs(apis []runner.API) string {
	if len(apis) == 0 {
		return "no API"
	}
	parts := make([]string, len(apis))
	for i, a := range apis {
		parts[i] = string(a)
	}
	return strings.Join(parts, " or ")
}
