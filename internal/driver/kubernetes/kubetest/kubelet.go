package kubetest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NodeName is the one node the kubelet stand-in runs pods on.
const NodeName = "kubetest-node"

var (
	podGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodeGVR  = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	nsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	saGVR    = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	eventGVR = schema.GroupVersionResource{Version: "v1", Resource: "events"}
)

// kubelet stands in for what a cluster runs beside the API server, just
// enough for pods of the agent-sandbox controller: the scheduler (every
// pod is bound to NodeName), the kubelet and the service-account
// controller (every namespace gets its "default" ServiceAccount, without
// which admission refuses pods). By default no container runs: a bound
// pod is reported Running and Ready with a pod IP of its own
// (10.244.x.y) at once, and a pod being deleted is let go at once, so
// nothing answers at the pod IP and tests dial a stand-in sshd there.
// With RunPods the pods' containers run under podman (podRunner). There
// is no garbage collector either way: the pods and volume claims of a
// deleted Sandbox stay.
type kubelet struct {
	dc    dynamic.Interface
	pods  cache.SharedIndexInformer
	queue workqueue.TypedRateLimitingInterface[string]
	// runner runs the pods' containers (RunPods), or is nil.
	runner *podRunner

	mu   sync.Mutex
	ips  map[types.UID]string
	next int
}

// workers is how many pods the stand-in works on at once.
const workers = 4

// startKubelet runs the stand-in until ctx ends; done is closed once it
// has stopped and, with a runner, removed what it made in the podman
// root. dir is the server's scratch directory.
func startKubelet(ctx context.Context, dc dynamic.Interface, cfg controllerConfig, dir string) (k *kubelet, done <-chan struct{}, err error) {
	if err := registerNode(ctx, dc); err != nil {
		return nil, nil, err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 2*time.Second)
	k = &kubelet{
		dc: dc, pods: f.ForResource(podGVR).Informer(), ips: map[types.UID]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	if p := cfg.podman; p != nil {
		if k.runner, err = newPodRunner(ctx, *p, dc, filepath.Join(dir, "pods"), k.queue.Add); err != nil {
			return nil, nil, err
		}
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	// A resync redelivers every pod: a pass that failed is tried again.
	if _, err := k.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, nil, err
	}
	namespaces := f.ForResource(nsGVR).Informer()
	if _, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				k.queue.Add("namespace:" + u.GetName())
			}
		},
	}); err != nil {
		return nil, nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, nil, fmt.Errorf("kubelet stand-in: %s not synced", typ)
		}
	}
	ch := make(chan struct{})
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k.work(ctx) {
			}
		})
	}
	go func() {
		defer close(ch)
		wg.Wait()
		f.Shutdown()
		if k.runner != nil {
			k.runner.wg.Wait()
			k.runner.cleanup()
		}
	}()
	return k, ch, nil
}

// registerNode makes the node pods are bound to, Ready.
func registerNode(ctx context.Context, dc dynamic.Interface) error {
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeName},
	}
	u, err := toUnstructured(node)
	if err != nil {
		return err
	}
	if _, err := dc.Resource(nodeGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubelet stand-in: create node: %w", err)
	}
	cur, err := dc.Resource(nodeGVR).Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, node); err != nil {
		return err
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubetest's kubelet stand-in", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if u, err = toUnstructured(node); err != nil {
		return err
	}
	if _, err := dc.Resource(nodeGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubelet stand-in: node status: %w", err)
	}
	return nil
}

// work handles one queued key; false once the queue is shut down.
func (k *kubelet) work(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.handle(ctx, key); err != nil && ctx.Err() == nil {
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *kubelet) handle(ctx context.Context, key string) error {
	if ns, ok := strings.CutPrefix(key, "namespace:"); ok {
		sa := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": ns},
		}}
		_, err := k.dc.Resource(saGVR).Namespace(ns).Create(ctx, sa, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || isTerminating(err) {
			return nil
		}
		return err
	}
	obj, exists, err := k.pods.GetStore().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		if k.runner != nil {
			k.runner.orphans(key, "")
		}
		return nil
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &pod); err != nil {
		return err
	}
	if k.runner != nil {
		k.runner.orphans(key, pod.UID)
	}
	pods := k.dc.Resource(podGVR).Namespace(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if k.runner != nil && !k.runner.released(&pod) {
			return nil // queued again once its containers are gone
		}
		// What a kubelet does once the containers are gone.
		zero := int64(0)
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			if k.runner != nil {
				k.runner.forget(pod.UID)
			}
			return nil
		}
		return err
	case pod.Spec.NodeName == "":
		binding := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Binding",
			"metadata": map[string]any{"name": pod.Name, "namespace": pod.Namespace, "uid": string(pod.UID)},
			"target":   map[string]any{"apiVersion": "v1", "kind": "Node", "name": NodeName},
		}}
		_, err := pods.Create(ctx, binding, metav1.CreateOptions{}, "binding")
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // bound or gone meanwhile: its next event says which
		}
		return err
	case pod.Spec.NodeName != NodeName:
		return nil
	case k.runner != nil:
		return k.syncPod(ctx, &pod)
	case pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	}
	k.run(&pod)
	u, err := toUnstructured(&pod)
	if err != nil {
		return err
	}
	_, err = pods.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer version is on its way to the queue
	}
	return err
}

// syncPod runs the pod's containers as far as they go now, and writes
// the pod's status if it changed.
func (k *kubelet) syncPod(ctx context.Context, pod *corev1.Pod) error {
	st, err := k.runner.sync(ctx, pod)
	if st == nil || equality.Semantic.DeepEqual(pod.Status, *st) {
		return err
	}
	pod.Status = *st
	u, uerr := toUnstructured(pod)
	if uerr != nil {
		return uerr
	}
	_, uerr = k.dc.Resource(podGVR).Namespace(pod.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if uerr != nil && !apierrors.IsConflict(uerr) && !apierrors.IsNotFound(uerr) {
		return uerr
	}
	return err
}

// run sets the status of a pod whose containers all started and are ready.
func (k *kubelet) run(pod *corev1.Pod) {
	now := metav1.Now()
	ip := k.ip(pod.UID)
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	st.StartTime = &now
	st.Conditions = nil
	for _, c := range []corev1.PodConditionType{
		corev1.PodReadyToStartContainers, corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
	} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	started := true
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "kubetest://" + c.Image, ContainerID: "kubetest://" + string(pod.UID) + "-" + c.Name,
			Ready: true, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "kubetest://" + c.Image, ContainerID: "kubetest://" + string(pod.UID) + "-" + c.Name,
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// ip is the pod's address: 10.244.0.2 onwards, one per pod (by UID), so a
// pod made again after a suspend gets a new one, as on a real node.
func (k *kubelet) ip(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.ips[uid]; ok {
		return ip
	}
	n := k.next
	k.next++
	ip := fmt.Sprintf("10.244.%d.%d", n/250, n%250+2)
	k.ips[uid] = ip
	return ip
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func isTerminating(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s) && s.Status().Reason == metav1.StatusReasonForbidden && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
