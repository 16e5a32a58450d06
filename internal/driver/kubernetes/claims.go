package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
)

// bound finds the Sandbox the controller bound the sandbox's claim to, and
// labels (and annotates) it as the claim is, with berth's keys, so that from then on it is
// found, listed and watched like any other. The controller copies none of
// a claim's labels to the Sandbox it adopts from the pool or cold-starts:
// it names it in the claim's status and labels it with the claim's uid.
// A claim not bound yet, or none, is fault.NotFound.
func (d *Driver) bound(ctx context.Context, id sandbox.ID) (Sandbox, error) {
	notFound := fault.Errorf(fault.NotFound, "kubernetes: Sandbox of %s", id)
	u, err := d.claims().Get(ctx, objectName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Sandbox{}, notFound
	}
	if err != nil {
		return Sandbox{}, fmt.Errorf("kubernetes: get SandboxClaim of %s: %w", id, err)
	}
	var claim SandboxClaim
	if err := fromUnstructured(u, &claim); err != nil {
		return Sandbox{}, err
	}
	if claim.Labels[labelDeployment] != d.cfg.Deployment || claim.Labels[labelSandbox] != string(id) {
		return Sandbox{}, notFound // another gateway's
	}
	sb, err := d.claimedSandbox(ctx, claim)
	if err != nil {
		return Sandbox{}, err
	}
	if sb == nil {
		return Sandbox{}, notFound
	}
	labels, ann := d.cfg.labels(sandbox.Sandbox{}), annotations(sandbox.Sandbox{}) // berth's keys, the claim's values
	for k := range labels {
		labels[k] = claim.Labels[k]
	}
	for k := range ann {
		ann[k] = claim.Annotations[k]
	}
	// The uid makes the patch fail, not label another, should the Sandbox
	// be deleted and its name reused meanwhile.
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": sb.GetUID(), "labels": labels, "annotations": ann}})
	if err != nil {
		return Sandbox{}, err
	}
	out, err := d.sandboxes().Patch(ctx, sb.GetName(), types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return Sandbox{}, notFound
		}
		return Sandbox{}, fmt.Errorf("kubernetes: label Sandbox %s of %s: %w", sb.GetName(), id, err)
	}
	d.log.InfoContext(ctx, "claimed Sandbox labelled", "sandbox", id, "name", out.GetName())
	var res Sandbox
	if err := fromUnstructured(out, &res); err != nil {
		return Sandbox{}, err
	}
	return res, nil
}

// claimedSandbox is the Sandbox the claim's status names, or else the one
// carrying the claim's uid; only one that carries that uid is the claim's
// (a name in the status may be stale). Nil when there is none yet.
func (d *Driver) claimedSandbox(ctx context.Context, claim SandboxClaim) (*unstructured.Unstructured, error) {
	if claim.Status.Sandbox != nil && claim.Status.Sandbox.Name != "" {
		u, err := d.sandboxes().Get(ctx, claim.Status.Sandbox.Name, metav1.GetOptions{})
		switch {
		case err == nil && u.GetLabels()[labelClaimUID] == string(claim.UID):
			return u, nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("kubernetes: get Sandbox %s: %w", claim.Status.Sandbox.Name, err)
		}
	}
	list, err := d.sandboxes().List(ctx, metav1.ListOptions{LabelSelector: labelClaimUID + "=" + string(claim.UID)})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list Sandboxes of claim %s: %w", claim.Name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// refreshToken gives a claimed sandbox's next pod a new one-time token.
// The controller writes the claim's pod metadata over the Sandbox's pod
// template on every pass, so the token goes into the claim, and the pod
// is started (the caller sets it running) only once the controller has
// carried it to the Sandbox: the pod is made from the template then.
func (d *Driver) refreshToken(ctx context.Context, id sandbox.ID, name string, token secret.Secret) error {
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"additionalPodMetadata": map[string]any{
		"annotations": map[string]any{annotationBootstrap: token.Reveal()},
	}}})
	if err != nil {
		return err
	}
	if _, err := d.claims().Patch(ctx, objectName(id), types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fault.Errorf(fault.NotFound, "kubernetes: SandboxClaim of %s", id)
		}
		return fmt.Errorf("kubernetes: patch SandboxClaim of %s: %w", id, err)
	}
	return d.waitSandbox(ctx, name, "the controller to carry the claim's new token to Sandbox "+name, func(sb Sandbox) bool {
		return sb.Spec.PodTemplate.Metadata.Annotations[annotationBootstrap] == token.Reveal()
	})
}

// labelClaimUID is the label the controller puts on the Sandbox it binds
// to a claim: the claim's uid.
const labelClaimUID = "agents.x-k8s.io/claim-uid"
