package sandbox

import "time"

// Metrics is what the service reports to the deployment's monitoring
// (SPEC S17). The composition root gives it Prometheus collectors; nil
// reports nothing.
type Metrics interface {
	// Created counts a sandbox admitted.
	Created(purpose Purpose)
	// CreateFailed counts a create that did not end in a running sandbox:
	// refused or in error before admission (stage "admission"), or whose
	// machine did not start (stage "start").
	CreateFailed(stage string)
	// Ready observes how long a new sandbox took from its create to
	// running (an engineer's: until sshd answers; SPEC S10).
	Ready(purpose Purpose, d time.Duration)
	// Swept observes how long one sweep took.
	Swept(d time.Duration)
}

// Stages of CreateFailed.
const (
	StageAdmission = "admission"
	StageStart     = "start"
)

// Count is how many live sandboxes are in one state of one class.
type Count struct {
	State State
	Class string
	N     int
}

type noMetrics struct{}

func (noMetrics) Created(Purpose)              {}
func (noMetrics) CreateFailed(string)          {}
func (noMetrics) Ready(Purpose, time.Duration) {}
func (noMetrics) Swept(time.Duration)          {}
