package trigger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/trigger/event"
)

// Follow-ups (SPEC S13, sessions): a trigger's session opens a draft pull
// request after its first task; a review of that pull request (a comment
// on its diff, or a review submitted with a text), or a comment on it
// that starts with /berth, is the session's next task. The delivery is
// recorded once under the session's trigger, the task given as the
// trigger's author (the session's owner), and the task's report comments
// on the pull request with its summary and cost.

// followUpCommand starts a plain comment on a session's pull request
// that is its next task.
const followUpCommand = "/berth"

// followUpTask is the task a comment on a pull request gives the session
// that opened it: a review's text, or what follows /berth in a plain
// comment's; ok is false for a comment that gives none.
func followUpTask(e event.Event, max int) (task string, ok bool) {
	text := strings.TrimSpace(e.Comment)
	first, rest, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	command := first == followUpCommand || strings.HasPrefix(first, followUpCommand+" ")
	switch {
	case command:
		text = strings.TrimSpace(strings.TrimSpace(strings.TrimPrefix(first, followUpCommand)) + "\n" + rest)
	case !e.Review:
		return "", false // the conversation's, not the agent's
	}
	if text == "" {
		return "", false
	}
	who := "A reviewer"
	if e.Author != "" {
		who = "@" + e.Author
	}
	task = fmt.Sprintf("%s reviewed your pull request %s and asks:\n\n%s\n", who, e.URL, text)
	if len(task) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(task[cut]) {
			cut--
		}
		task = task[:cut]
	}
	return task, true
}

// followUp hands e to the session whose pull request it reviews. ok is
// false when e is no such review (or no live session follows that pull
// request): it goes to the triggers as any delivery.
func (s *Service) followUp(ctx context.Context, e event.Event, repo string) (Received, bool) {
	if e.Kind != event.KindComment || e.Thread.Kind != forge.ThreadChange {
		return Received{}, false
	}
	task, ok := followUpTask(e, s.cfg.MaxTask)
	if !ok {
		return Received{}, false
	}
	first, err := s.store.SessionOfChange(ctx, repo, e.Thread.Number)
	if err != nil {
		if !errors.Is(err, fault.NotFound) {
			s.log.WarnContext(ctx, "could not look for the session of a pull request", "repo", repo, "number", e.Thread.Number, "err", err)
		}
		return Received{}, false
	}
	t, err := s.store.GetTrigger(ctx, first.Trigger)
	if err != nil {
		// A hand-made session, or its trigger deleted since: its owner
		// gives it tasks (berth sandbox task).
		return Received{}, false
	}
	d := Delivery{Trigger: t.ID, ID: e.Delivery, At: s.now().UTC(), Thread: e.Thread, URL: e.URL}
	// A follow-up makes no new sandbox: the trigger's concurrency is not
	// asked.
	d, err = s.store.AddDelivery(ctx, d, func(int) (Outcome, string) { return "", "" })
	if err != nil {
		if errors.Is(err, fault.Conflict) {
			return Received{Trigger: t, Delivery: d, Again: true}, true
		}
		d.Outcome, d.Reason = Failed, "could not record the delivery: "+err.Error()
		return Received{Trigger: t, Delivery: d}, true
	}
	d.Outcome, d.Reason = s.nextTask(ctx, t, first, e, task)
	d.Sandbox = first.Sandbox
	if err := s.store.FinishDelivery(ctx, d); err != nil {
		s.log.ErrorContext(ctx, "could not record a delivery's outcome", "trigger", t.ID, "delivery", d.ID, "err", err)
	}
	s.log.InfoContext(ctx, "trigger follow-up", "trigger", t.ID, "name", t.Name, "delivery", d.ID, "outcome", d.Outcome, "reason", d.Reason, "sandbox", d.Sandbox)
	return Received{Trigger: t, Delivery: d}, true
}

// nextTask gives the session of first its next task as t's author, and
// records the report its end owes the pull request.
func (s *Service) nextTask(ctx context.Context, t Trigger, first Report, e event.Event, task string) (Outcome, string) {
	if why, err := s.overBudget(ctx, t); err != nil {
		return Failed, "could not read today's spending: " + err.Error()
	} else if why != "" {
		return Skipped, why
	}
	owner, err := s.accounts.User(ctx, t.Owner)
	if err != nil {
		return Skipped, "its author " + t.Owner + " is gone: set it again"
	}
	if owner.Disabled {
		return Skipped, "its author " + owner.Name + " is disabled: set it again"
	}
	if s.results == nil {
		return Failed, "this gateway reads no run's result"
	}
	seq := s.results.LatestSeq(ctx, first.Sandbox) + 1 // read before the start records it
	sb, err := s.boxes.NextTask(ctx, account.Principal{User: owner}, string(first.Sandbox), task)
	if err != nil {
		if errors.Is(err, fault.Conflict) && s.reporter != nil && !e.Review {
			// An explicit /berth is answered where it was asked. (A review's
			// comments come in bursts, one delivery each: the first is
			// taken, the rest are only recorded.)
			body := fmt.Sprintf("berth could not take this: %s. Ask again once it is done.", reasonOf(err))
			if _, cerr := s.reporter.Comment(ctx, s.repo(first.Repo), e.Thread, body); cerr != nil {
				s.log.WarnContext(ctx, "could not tell a pull request its review was not taken", "sandbox", first.Sandbox, "err", cerr)
			}
		}
		if errors.Is(err, fault.Conflict) {
			return Skipped, reasonOf(err)
		}
		return Failed, err.Error()
	}
	s.owe(ctx, sb, seq, first, e.Thread)
	return Started, ""
}

// owe records that the session sb's task seq owes pr, the session's pull
// request, a comment; from is a report of the session's earlier.
func (s *Service) owe(ctx context.Context, sb sandbox.Sandbox, seq int, from Report, pr forge.Thread) {
	if s.reporter == nil || seq < 2 {
		return
	}
	r := Report{Sandbox: sb.ID, Seq: seq, Org: sb.Org, Repo: from.Repo, Base: from.Base, Trigger: from.Trigger, Thread: pr, Comment: true}
	if err := s.store.AddReport(ctx, r); err != nil {
		s.log.ErrorContext(ctx, "could not record a task's report", "sandbox", sb.ID, "err", err)
	}
}

// reasonOf is an error's own words, without the operation's prefix.
func reasonOf(err error) string {
	if fe, ok := errors.AsType[*fault.Error](err); ok && fe.Message != "" {
		return fe.Message
	}
	return err.Error()
}

// TaskGiven records that a session's task seq, given by hand (berth
// sandbox task), owes the session's pull request a comment, as a
// follow-up's does: when the session has one open.
func (s *Service) TaskGiven(ctx context.Context, sb sandbox.Sandbox, seq int) {
	if s.reporter == nil || !sb.Session {
		return
	}
	last, err := s.store.GetReport(ctx, sb.ID)
	if err != nil {
		if !errors.Is(err, fault.NotFound) {
			s.log.WarnContext(ctx, "could not read a session's report", "sandbox", sb.ID, "err", err)
		}
		return
	}
	// The pull request: the first task's change, or the thread a later
	// task's report comments on.
	pr := forge.Thread{Kind: forge.ThreadChange, Number: last.Change.Number}
	if max(last.Seq, 1) > 1 {
		pr = last.Thread
	}
	if pr.Kind != forge.ThreadChange || pr.Number == 0 {
		return
	}
	s.owe(ctx, sb, seq, last, pr)
}
