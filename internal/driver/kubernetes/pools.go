package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/warm"
)

// claim asks the class's warm pool for a sandbox. The controller adopts a
// ready member (or, with none, starts one from the template); either way
// the pod gets the claim's annotations, the one-time token among them.
func (d *Driver) claim(ctx context.Context, spec sandbox.Spec) error {
	obj, err := toUnstructured(ClaimObject(d.cfg, spec))
	if err != nil {
		return err
	}
	if _, err := d.claims().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: create SandboxClaim %s: %w", obj.GetName(), err)
	}
	return nil
}

// SyncPools makes this deployment's templates and pools exactly those of
// pools: created, updated where a class changed (the pool replaces its
// members as they are claimed, OnReplenish), and deleted where a class is
// gone, has warm 0, or warm pools are off.
func (d *Driver) SyncPools(ctx context.Context, pools []warm.Pool) error {
	want := map[string]bool{}
	var errs []error
	for _, p := range pools {
		tpl, pool := TemplateObject(d.cfg, p), PoolObject(d.cfg, p)
		want[tpl.Name] = true
		// The template first: a pool without one makes nothing.
		if err := d.apply(ctx, templateGVR, tpl.Name, tpl); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := d.apply(ctx, poolGVR, pool.Name, pool); err != nil {
			errs = append(errs, err)
		}
	}
	sel := metav1.ListOptions{LabelSelector: labelDeployment + "=" + d.cfg.Deployment + "," + labelPool}
	// Pools before templates, so no pool is left without its template.
	for _, gvr := range []struct {
		res  dynamic.ResourceInterface
		kind string
	}{
		{d.client.Resource(poolGVR).Namespace(d.cfg.Namespace), "SandboxWarmPool"},
		{d.client.Resource(templateGVR).Namespace(d.cfg.Namespace), "SandboxTemplate"},
	} {
		list, err := gvr.res.List(ctx, sel)
		if err != nil {
			errs = append(errs, fmt.Errorf("kubernetes: list %ss: %w", gvr.kind, err))
			continue
		}
		for _, u := range list.Items {
			if want[u.GetName()] {
				continue
			}
			if err := gvr.res.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("kubernetes: delete %s %s: %w", gvr.kind, u.GetName(), err))
				continue
			}
			d.log.InfoContext(ctx, "warm pool object deleted", "kind", gvr.kind, "name", u.GetName())
		}
	}
	return errors.Join(errs...)
}

// apply creates obj, or rewrites the spec of the one there when it
// differs, or a label of berth's does; the status is the controller's.
// Only what berth writes is compared and rewritten: the controller adds
// labels of its own (a template's agents.x-k8s.io/sandbox-template-ref-hash)
// and the server fills in defaults, and neither is a reason to write.
func (d *Driver) apply(ctx context.Context, gvr schema.GroupVersionResource, name string, obj any) error {
	res := d.client.Resource(gvr).Namespace(d.cfg.Namespace)
	u, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	cur, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes: create %s %s: %w", u.GetKind(), name, err)
		}
		d.log.InfoContext(ctx, "warm pool object created", "kind", u.GetKind(), "name", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes: get %s %s: %w", u.GetKind(), name, err)
	}
	labels, changed := cur.GetLabels(), false
	for k, v := range u.GetLabels() {
		if have, ok := labels[k]; !ok || have != v {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k], changed = v, true
		}
	}
	if sameSpec(cur, u) && !changed {
		return nil
	}
	cur.Object["spec"] = u.Object["spec"]
	cur.SetLabels(labels)
	if _, err := res.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: update %s %s: %w", u.GetKind(), name, err)
	}
	d.log.InfoContext(ctx, "warm pool object updated", "kind", u.GetKind(), "name", name)
	return nil
}

// sameSpec compares what the driver wrote with what it would write, both
// through JSON: the server fills in defaults (operatingMode, policies,
// protocols…), so only the fields the driver sets are compared.
func sameSpec(cur, want *unstructured.Unstructured) bool {
	return subset(want.Object["spec"], cur.Object["spec"])
}

// subset reports whether every value of a is in b.
func subset(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range av {
			if !subset(v, bv[k]) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !subset(av[i], bv[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normal(a), normal(b))
	}
}

// normal makes JSON numbers comparable whatever decoded them.
func normal(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case int32:
		return float64(n)
	}
	return v
}
