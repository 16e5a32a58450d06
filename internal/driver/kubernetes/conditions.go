package kubernetes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/internal/sandbox"
)

// claimRefusals are the reasons of a claim's Ready=False that no wait
// mends: the controller refused the claim as written (its pod metadata,
// env or volume claims), its pool or the pool's template is missing, or
// the claim expired. The controller retries a missing pool or template,
// but berth writes both before it claims (SyncPools), so one missing now
// is a class that is gone or out of step, not a race.
var claimRefusals = map[string]string{
	"InvalidMetadata":           "refused the claim's pod metadata",
	"EnvVarsInjectionRejected":  "refused the claim's environment",
	"VolumeClaimTemplatesError": "refused the claim's volume claims",
	"TemplateNotFound":          "found no SandboxTemplate for the claim's warm pool",
	"WarmPoolNotFound":          "found no warm pool for the claim",
	reasonClaimExpired:          "expired the claim",
}

// claimRefused is the error of a sandbox whose claim the controller
// refused (claimRefusals), in berth's words with the controller's reason
// and message; nil while the claim may still be bound, or has none. Only
// a condition of the claim's current generation counts: one written
// before the claim last changed is stale.
func (d *Driver) claimRefused(ctx context.Context, id sandbox.ID) error {
	u, err := d.claims().Get(ctx, objectName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes: get SandboxClaim of %s: %w", id, err)
	}
	var c SandboxClaim
	if err := fromUnstructured(u, &c); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, condReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.ObservedGeneration != c.Generation {
		return nil
	}
	what, ok := claimRefusals[ready.Reason]
	if !ok {
		return nil
	}
	return fmt.Errorf("kubernetes: the agent-sandbox controller %s (SandboxClaim %s on pool %s: %s)",
		what, c.Name, c.Spec.WarmPoolRef.Name, describe(ready))
}
