package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The agent-sandbox resources, v1beta1 only: every CRD declares a
// conversion webhook that the controller serves, so a v1alpha1 read or
// write fails without it (notes/kubernetes.md §1). The module that
// defines these types cannot be fetched here, so the driver declares the
// fields it uses and converts through unstructured objects.
var (
	sandboxGVR  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	poolGVR     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

const (
	apiVersionCore       = "agents.x-k8s.io/v1beta1"
	apiVersionExtensions = "extensions.agents.x-k8s.io/v1beta1"
)

// Sandbox is agents.x-k8s.io/v1beta1 Sandbox.
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxSpec   `json:"spec"`
	Status            SandboxStatus `json:"status,omitempty"`
}

// SandboxSpec is a Sandbox's spec.
type SandboxSpec struct {
	PodTemplate          PodTemplate   `json:"podTemplate"`
	VolumeClaimTemplates []PVCTemplate `json:"volumeClaimTemplates,omitempty"`
	ShutdownTime         *metav1.Time  `json:"shutdownTime,omitempty"`
	ShutdownPolicy       string        `json:"shutdownPolicy,omitempty"` // Delete | Retain
	OperatingMode        string        `json:"operatingMode,omitempty"`  // Running | Suspended
}

// PodTemplate is the pod a Sandbox runs.
type PodTemplate struct {
	Metadata Meta           `json:"metadata,omitempty"`
	Spec     corev1.PodSpec `json:"spec"`
}

// PVCTemplate is a volume claim template; its name is the pod volume's.
type PVCTemplate struct {
	Metadata Meta                             `json:"metadata,omitempty"`
	Spec     corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// Meta is the embedded metadata of templates.
type Meta struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SandboxStatus is what the controller reports of a Sandbox.
type SandboxStatus struct {
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
	PodIPs      []string           `json:"podIPs,omitempty"`
	NodeName    string             `json:"nodeName,omitempty"`
	Service     string             `json:"service,omitempty"`
	ServiceFQDN string             `json:"serviceFQDN,omitempty"`
	Selector    string             `json:"selector,omitempty"`
}

// SandboxTemplate is extensions.agents.x-k8s.io/v1beta1 SandboxTemplate:
// the blueprint of a warm pool's sandboxes.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TemplateSpec `json:"spec"`
}

// TemplateSpec is a SandboxTemplate's spec.
type TemplateSpec struct {
	PodTemplate             PodTemplate   `json:"podTemplate"`
	VolumeClaimTemplates    []PVCTemplate `json:"volumeClaimTemplates,omitempty"`
	NetworkPolicyManagement string        `json:"networkPolicyManagement,omitempty"` // Managed | Unmanaged
}

// SandboxWarmPool is extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool.
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WarmPoolSpec   `json:"spec"`
	Status            WarmPoolStatus `json:"status,omitempty"`
}

// WarmPoolSpec is a SandboxWarmPool's spec.
type WarmPoolSpec struct {
	Replicas           *int32          `json:"replicas,omitempty"`
	SandboxTemplateRef LocalRef        `json:"sandboxTemplateRef"`
	UpdateStrategy     *UpdateStrategy `json:"updateStrategy,omitempty"`
}

// UpdateStrategy says when a pool replaces members made from an older
// template.
type UpdateStrategy struct {
	Type string `json:"type,omitempty"` // OnReplenish | Recreate
}

// LocalRef names an object in the same namespace.
type LocalRef struct {
	Name string `json:"name"`
}

// WarmPoolStatus is what the controller reports of a pool.
type WarmPoolStatus struct {
	Replicas      int32 `json:"replicas,omitempty"`
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// SandboxClaim is extensions.agents.x-k8s.io/v1beta1 SandboxClaim: a
// request for a sandbox from a warm pool.
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClaimSpec   `json:"spec"`
	Status            ClaimStatus `json:"status,omitempty"`
}

// ClaimSpec is a SandboxClaim's spec. It sets no env and no volume claim
// templates: either makes the controller cold-start a sandbox instead of
// adopting a warm one.
type ClaimSpec struct {
	WarmPoolRef           LocalRef `json:"warmPoolRef"`
	AdditionalPodMetadata *Meta    `json:"additionalPodMetadata,omitempty"`
}

// ClaimStatus says which sandbox a claim got.
type ClaimStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Sandbox    *ClaimedSandbox    `json:"sandbox,omitempty"`
}

// ClaimedSandbox is the sandbox a claim holds: an adopted one keeps its
// pool's name, so it is read here, never assumed.
type ClaimedSandbox struct {
	Name   string   `json:"name,omitempty"`
	PodIPs []string `json:"podIPs,omitempty"`
}

// Conditions and reasons the driver reads.
const (
	condReady     = "Ready"
	condSuspended = "Suspended"
	condFinished  = "Finished"

	reasonPodSucceeded   = "PodSucceeded"
	reasonPodFailed      = "PodFailed"
	reasonSandboxExpired = "SandboxExpired"
	reasonClaimExpired   = "ClaimExpired" // on claims only, never on a Sandbox

	modeRunning   = "Running"
	modeSuspended = "Suspended"

	policyRetain = "Retain"
	policyDelete = "Delete"
)
