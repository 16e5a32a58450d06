package trigger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// Report is what the gateway owes the forge for one run: a draft change
// after a clean author run (OpenPR), a comment on the thread that started
// it (Comment), a reviewer's verdict. It is written when the run starts
// and done once its sandbox has ended, retried until the forge takes it,
// so a gateway stopped in between owes it still.
type Report struct {
	Sandbox sandbox.ID
	// Seq is the run of the sandbox it is for: 1 (0 reads as 1), or a
	// session's later task, whose report comments on the session's pull
	// request.
	Seq     int
	Org     string
	Repo    string // host/path as resolved
	Base    string // "" the repository's default branch
	Trigger string // "" a hand-made run's
	Thread  forge.Thread
	OpenPR  bool
	Comment bool
	// State is pending until done or given up.
	State    ReportState
	Change   forge.Change
	Comments []string // the comments' addresses
	Error    string   // the last attempt's
	Attempts int
	NextAt   time.Time
}

// ReportState is a report's progress.
type ReportState string

const (
	ReportPending ReportState = "pending"
	ReportDone    ReportState = "done"
	ReportGaveUp  ReportState = "gave_up"
)

// maxAttempts is how often a report is tried before it is given up.
const maxAttempts = 8

// ReportStore keeps the reports.
type ReportStore interface {
	// AddReport records r, for its sandbox's run r.Seq.
	AddReport(ctx context.Context, r Report) error
	// GetReport reads the sandbox's latest report (the highest Seq).
	GetReport(ctx context.Context, id sandbox.ID) (Report, error)
	// DueReports lists pending reports whose sandbox has ended (or, a
	// session, waits suspended for its next task) and whose next attempt
	// is due at now.
	DueReports(ctx context.Context, now time.Time, limit int) ([]Report, error)
	// SessionOfChange is the first report (Seq 1) of a live session whose
	// change on repo is number: the session that pull request is
	// following; fault.NotFound when none is.
	SessionOfChange(ctx context.Context, repo string, number int) (Report, error)
	// ClaimReport takes r for one attempt: its attempts go up by one and
	// its next attempt to next, only if its attempts are still r's
	// (fault.Conflict when another replica took it).
	ClaimReport(ctx context.Context, r Report, next time.Time) error
	// SaveReport writes r's state, change, comments and error.
	SaveReport(ctx context.Context, r Report) error
}

// Result is what a finished run came to, as the report tells it.
type Result struct {
	Sandbox sandbox.Sandbox
	// Seq is the run it is of: the sandbox's latest (a session's task).
	Seq       int
	Ended     bool // the run is over
	Succeeded bool
	Error     string // why it failed
	Runner    string
	Model     string
	Branch    string
	Commit    string
	Summary   string // the agent's last words
	Tokens    int64
	// ModelUSD, MachineUSD and TotalUSD are nil when unknown (machine
	// time unpriced).
	ModelUSD, MachineUSD, TotalUSD *float64
	RunningTime                    time.Duration
	EgressRefused                  []string
	// Verdict is a reviewer's outcome (approved, changes_requested,
	// held) and its summary.
	Verdict, VerdictSummary string
}

// Results reads a run's result, and what runs cost so far: tokens, and
// dollars with machine time.
type Results interface {
	Result(ctx context.Context, id sandbox.ID) (Result, error)
	// LatestSeq is the number of a sandbox's latest run (a session's
	// task).
	LatestSeq(ctx context.Context, id sandbox.ID) int
	Spent(ctx context.Context, ids []sandbox.ID) (tokens int64, usd float64, err error)
}

// SetResults tells the service where runs' results are read (the
// gateway, which prices them).
func (s *Service) SetResults(r Results) { s.results = r }

// CheckOpenPR refuses --open-pr for a project whose agent configuration
// says pull_requests: off.
func (s *Service) CheckOpenPR(ctx context.Context, org, project string) error {
	if s.reporter == nil {
		return fault.Field("open_pr", "this deployment's forge (%s) takes no pull requests", s.forgeKind())
	}
	ok, err := s.opensPullRequests(ctx, org, project)
	if err != nil {
		return err
	}
	if !ok {
		return fault.Field("open_pr", "the project's runs open no pull requests (its agent configuration says pull_requests: off)")
	}
	return nil
}

// OpenPR records that a hand-made run (--open-pr) owes a draft change
// when it ends cleanly.
func (s *Service) OpenPR(ctx context.Context, sb sandbox.Sandbox) error {
	if s.reporter == nil {
		return fault.Field("open_pr", "this deployment's forge (%s) takes no pull requests", s.forgeKind())
	}
	if sb.Repo == "" || sb.Role == sandbox.RoleReviewer {
		return fault.Field("open_pr", "a pull request needs an author run on a repository")
	}
	return s.store.AddReport(ctx, Report{Sandbox: sb.ID, Org: sb.Org, Repo: sb.Repo, Base: sb.Branch, OpenPR: true})
}

// Concluded is told that a run ended: its report, if it owes one, is
// tried now.
func (s *Service) Concluded(ctx context.Context, id sandbox.ID) {
	r, err := s.store.GetReport(ctx, id)
	if errors.Is(err, fault.NotFound) {
		return
	}
	if err != nil {
		s.log.WarnContext(ctx, "could not read a run's report", "sandbox", id, "err", err)
		return
	}
	if r.State == ReportPending {
		s.attempt(ctx, r)
	}
}

// SweepReports tries the reports that are due: those whose run ended
// while no replica was there to report it, and those the forge refused
// for a while.
func (s *Service) SweepReports(ctx context.Context) error {
	rs, err := s.store.DueReports(ctx, s.now(), 20)
	if err != nil {
		return fmt.Errorf("due reports: %w", err)
	}
	for _, r := range rs {
		s.attempt(ctx, r)
	}
	return nil
}

// Run fires the schedules and sweeps the reports until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	// Schedules fire within a quarter-minute of coming due.
	t := time.NewTicker(min(interval, 15*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "could not fire the triggers' schedules", "err", err)
			}
			if err := s.SweepReports(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "could not sweep the runs' reports", "err", err)
			}
		}
	}
}

// attempt claims r and does it once.
func (s *Service) attempt(ctx context.Context, r Report) {
	if s.results == nil || s.reporter == nil {
		return
	}
	backoff := time.Duration(1<<min(r.Attempts, 10)) * 30 * time.Second
	if err := s.store.ClaimReport(ctx, r, s.now().Add(backoff)); err != nil {
		return // another replica has it, or it is gone
	}
	r.Attempts++
	res, err := s.results.Result(ctx, r.Sandbox)
	if err == nil && (!res.Ended || res.Seq < max(r.Seq, 1)) {
		return // not over (or, a session's task, not begun): the claim's next attempt comes back to it
	}
	if err == nil && res.Seq > max(r.Seq, 1) {
		err = fmt.Errorf("the session's task %d started before task %d's report was made", res.Seq, r.Seq)
		r.Attempts = maxAttempts
	}
	if err == nil {
		err = s.report(ctx, &r, res)
	}
	switch {
	case err == nil:
		r.State, r.Error = ReportDone, ""
	case r.Attempts >= maxAttempts || errors.Is(err, fault.NotFound) && res.Sandbox.ID == "":
		r.State, r.Error = ReportGaveUp, err.Error()
	default:
		r.Error = err.Error()
	}
	if err != nil {
		s.log.WarnContext(ctx, "the forge did not take a run's report", "sandbox", r.Sandbox, "attempt", r.Attempts, "err", err)
	}
	if err := s.store.SaveReport(ctx, r); err != nil {
		s.log.ErrorContext(ctx, "could not save a run's report", "sandbox", r.Sandbox, "err", err)
	}
}

// report takes res to the forge: the change (once), the comment, the
// verdict. What is done is kept in r, so a retry does only the rest.
func (s *Service) report(ctx context.Context, r *Report, res Result) error {
	repo := s.repo(r.Repo)
	var err error
	sb := res.Sandbox
	reviewer := sb.Role == sandbox.RoleReviewer
	open := r.OpenPR
	if open {
		// The project's say at the run's end: a team that turned pull
		// requests off since gets none.
		if open, err = s.opensPullRequests(ctx, sb.Org, sb.Project); err != nil {
			return fmt.Errorf("the project's agent configuration: %w", err)
		}
	}
	if open && !reviewer && res.Succeeded && res.Commit != "" && r.Change.Number == 0 {
		base := r.Base
		if base == "" {
			if base, err = s.reporter.DefaultBranch(ctx, repo); err != nil {
				return fmt.Errorf("default branch: %w", err)
			}
		}
		c, err := s.reporter.OpenChange(ctx, repo, forge.ChangeRequest{
			Head: res.Branch, Base: base, Title: changeTitle(sb, res), Body: forge.TrimBody(changeBody(res)),
		})
		if err != nil {
			return fmt.Errorf("open the pull request: %w", err)
		}
		r.Change = c
		if err := s.store.SaveReport(ctx, *r); err != nil {
			return err
		}
	}
	if !r.Comment || len(r.Comments) > 0 || r.Thread.Number == 0 {
		return nil
	}
	body := forge.TrimBody(threadComment(r, res))
	var url string
	if reviewer && r.Thread.Kind == forge.ThreadChange {
		url, err = s.reporter.Review(ctx, repo, r.Thread.Number, body)
	} else {
		url, err = s.reporter.Comment(ctx, repo, r.Thread, body)
	}
	if err != nil {
		return fmt.Errorf("comment on #%d: %w", r.Thread.Number, err)
	}
	r.Comments = append(r.Comments, url)
	return nil
}

// changeTitle is the task's first line, bounded.
func changeTitle(sb sandbox.Sandbox, res Result) string {
	first, _, _ := strings.Cut(strings.TrimSpace(sb.Task), "\n")
	first = strings.TrimSpace(first)
	if first == "" {
		first = "berth: " + sb.Name
	}
	if len(first) > 120 {
		cut := 117
		for cut > 0 && !utf8.RuneStart(first[cut]) {
			cut--
		}
		first = first[:cut] + "…"
	}
	return first
}

// usd is a sum of dollars as people read it: cents, or four places
// below a cent.
func usd(x float64) string {
	switch {
	case x == 0:
		return "$0"
	case x < 0.0001:
		return "<$0.0001"
	case x < 0.01:
		return fmt.Sprintf("$%.4f", x)
	}
	return fmt.Sprintf("$%.2f", x)
}

// cost is a run's cost in one line.
func cost(res Result) string {
	var parts []string
	if res.TotalUSD != nil {
		parts = append(parts, "**"+usd(*res.TotalUSD)+"** in all")
	}
	model := fmt.Sprintf("%d tokens", res.Tokens)
	if res.ModelUSD != nil {
		model += " (" + usd(*res.ModelUSD) + ")"
	}
	parts = append(parts, "model: "+model)
	cores := res.Sandbox.CPU.String() + " cores"
	if cores == "1 cores" {
		cores = "1 core"
	}
	machine := fmt.Sprintf("%s on %s", res.RunningTime.Round(time.Second), cores)
	if res.MachineUSD != nil {
		machine += " (" + usd(*res.MachineUSD) + ")"
	}
	parts = append(parts, "machine: "+machine)
	return strings.Join(parts, " · ")
}

// changeBody is a draft change's description: what the agent said, what
// it cost, what it was refused.
func changeBody(res Result) string {
	var b strings.Builder
	sb := res.Sandbox
	fmt.Fprintf(&b, "Opened by berth for the agent run in sandbox `%s`", sb.Name)
	if who := strings.Trim(res.Runner+", "+res.Model, ", "); who != "" {
		fmt.Fprintf(&b, " (%s)", who)
	}
	b.WriteString(".\n\n")
	if s := strings.TrimSpace(res.Summary); s != "" {
		b.WriteString("### Summary\n\n" + s + "\n\n")
	}
	b.WriteString("### Cost\n\n" + cost(res) + "\n\n")
	if len(res.EgressRefused) > 0 {
		b.WriteString("### Egress refused\n\nThe run asked for hosts its policy does not allow: " + strings.Join(res.EgressRefused, ", ") + "\n\n")
	}
	b.WriteString("### Task\n\n")
	for _, l := range strings.Split(strings.TrimSpace(sb.Task), "\n") {
		b.WriteString("> " + l + "\n")
	}
	if res.Commit != "" {
		fmt.Fprintf(&b, "\nBranch `%s`, commit %s.\n", res.Branch, res.Commit)
	}
	return b.String()
}

// threadComment is what the thread that started the run is told.
func threadComment(r *Report, res Result) string {
	if r.Seq > 1 {
		return taskComment(r, res)
	}
	sb := res.Sandbox
	var b strings.Builder
	switch {
	case sb.Role == sandbox.RoleReviewer:
		fmt.Fprintf(&b, "berth's review (sandbox `%s`): **%s**\n\n", sb.Name, strings.ReplaceAll(orDefault(res.Verdict), "_", " "))
		if res.VerdictSummary != "" {
			b.WriteString(res.VerdictSummary + "\n\n")
		}
	case !res.Succeeded:
		fmt.Fprintf(&b, "berth's run for this did not finish cleanly (sandbox `%s`): %s\n\n", sb.Name, orDefault(res.Error))
	case r.Change.URL != "":
		verb := "opened"
		if r.Change.Existed {
			verb = "updated"
		}
		fmt.Fprintf(&b, "berth %s a draft for this: %s\n\n", verb, r.Change.URL)
	case res.Commit == "":
		fmt.Fprintf(&b, "berth's run for this (sandbox `%s`) finished with no change to propose.\n\n", sb.Name)
	default:
		fmt.Fprintf(&b, "berth's run for this (sandbox `%s`) pushed `%s` (%s).\n\n", sb.Name, res.Branch, res.Commit)
	}
	if s := strings.TrimSpace(res.Summary); s != "" && sb.Role != sandbox.RoleReviewer && res.Succeeded && r.Change.URL == "" {
		b.WriteString(s + "\n\n")
	}
	b.WriteString("Cost: " + cost(res) + "\n")
	if len(res.EgressRefused) > 0 {
		b.WriteString("\nEgress refused: " + strings.Join(res.EgressRefused, ", ") + "\n")
	}
	return b.String()
}

// taskComment is what a session's pull request is told of a later task
// (a follow-up): how it ended, what the agent said, what it cost, and the
// session so far.
func taskComment(r *Report, res Result) string {
	sb := res.Sandbox
	var b strings.Builder
	switch {
	case !res.Succeeded:
		fmt.Fprintf(&b, "berth's session `%s` did not finish task %d cleanly: %s\n\n", sb.Name, r.Seq, orDefault(res.Error))
	case res.Commit == "":
		fmt.Fprintf(&b, "berth's session `%s` finished task %d with nothing new to push.\n\n", sb.Name, r.Seq)
	default:
		fmt.Fprintf(&b, "berth's session `%s` finished task %d and pushed `%s` (%s).\n\n", sb.Name, r.Seq, res.Branch, res.Commit)
	}
	if s := strings.TrimSpace(res.Summary); s != "" && res.Succeeded {
		b.WriteString(s + "\n\n")
	}
	model := fmt.Sprintf("%d tokens", res.Tokens)
	if res.ModelUSD != nil {
		model += " (" + usd(*res.ModelUSD) + ")"
	}
	b.WriteString("This task: " + model)
	if res.TotalUSD != nil {
		b.WriteString(" · the session so far: **" + usd(*res.TotalUSD) + "** in all, machine time included")
	}
	b.WriteString("\n")
	if len(res.EgressRefused) > 0 {
		b.WriteString("\nEgress refused: " + strings.Join(res.EgressRefused, ", ") + "\n")
	}
	return b.String()
}
